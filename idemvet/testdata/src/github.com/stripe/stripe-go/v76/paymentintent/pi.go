package paymentintent

import stripe "github.com/stripe/stripe-go/v76"

func New(p *stripe.PaymentIntentParams) (*stripe.PaymentIntent, error)            { return nil, nil }
func Get(id string, p *stripe.PaymentIntentParams) (*stripe.PaymentIntent, error) { return nil, nil }
