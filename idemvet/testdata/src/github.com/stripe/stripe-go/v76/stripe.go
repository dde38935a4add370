package stripe

type Params struct {
	IdempotencyKey *string
}

func (p *Params) SetIdempotencyKey(k string) { p.IdempotencyKey = &k }

type PaymentIntentParams struct {
	Params `form:"*"`
	Amount *int64
}

type RefundParams struct {
	Params        `form:"*"`
	PaymentIntent *string
}

type PaymentIntent struct{ ID string }

type Refund struct{ ID string }

func String(s string) *string { return &s }
func Int64(n int64) *int64    { return &n }
