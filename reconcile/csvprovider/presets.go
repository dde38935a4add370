package csvprovider

import (
	"fmt"
	"time"

	"github.com/idemkit/idem/reconcile/money"
)

// Names of the shipped layouts, as `idem reconcile --provider-format` takes
// them.
const (
	FormatCSV             = "csv"
	FormatStripeBalance   = "stripe-balance"
	FormatAdyenSettlement = "adyen-settlement"
)

// Formats lists the shipped layouts' names.
var Formats = []string{FormatCSV, FormatStripeBalance, FormatAdyenSettlement}

// Preset returns a fresh copy of the named layout, to adjust with
// [Layout.ParseMap], [Layout.ParseStatusMap] and [Layout.SetTypes].
func Preset(name string) (Layout, error) {
	switch name {
	case FormatCSV, "":
		return CSV(), nil
	case FormatStripeBalance:
		return StripeBalance(), nil
	case FormatAdyenSettlement:
		return AdyenSettlement(), nil
	}
	return Layout{}, fmt.Errorf("csvprovider: unknown format %q (want csv, stripe-balance or adyen-settlement)", name)
}

// CSV is idem's own settlement file: key, amount (integer minor units,
// signed), currency, status (applied or failed), applied_at (RFC 3339),
// optionally scope.
func CSV() Layout {
	return Layout{
		Name: FormatCSV,
		Columns: map[string]string{FieldKey: "key", FieldAmount: "amount", FieldCurrency: "currency",
			FieldStatus: "status", FieldAppliedAt: "applied_at", FieldScope: "scope"},
		Optional: []string{FieldScope},
	}
}

// StripeBalance is Stripe's balance-transaction export (Dashboard →
// Balances → Export, or the balance report's itemized CSV):
//
//	id,Type,Source,Amount,Fee,Net,Currency,Created (UTC),Description,…,idempotency_key (metadata)
//
// Amounts are decimal major units ("50.00", "-5.00", "5000" for JPY; a
// ',' between thousands is accepted), compared as magnitudes; Currency is
// lower case; Created (UTC) is "2006-01-02 15:04:05" (or without seconds)
// in UTC. The key is the metadata column "idempotency_key (metadata)"
// (map another with key=COLUMN); Source is the provider's reference.
// Type charge and payment are applied charges, refund and payment_refund
// refunds of the same order; every other type (payout, stripe_fee,
// adjustment, application_fee, transfer…) is skipped and counted, and so
// is a row with no key.
func StripeBalance() Layout {
	return Layout{
		Name: FormatStripeBalance,
		Columns: map[string]string{FieldKey: "idempotency_key (metadata)", FieldAmount: "Amount",
			FieldCurrency: "Currency", FieldAppliedAt: "Created (UTC)", FieldType: "Type", FieldReference: "Source"},
		Amount:      money.Format{Unit: money.Major, Thousands: ','},
		Magnitude:   true,
		TimeLayouts: []string{time.DateTime, "2006-01-02 15:04"},
		Location:    time.UTC,
		Statuses: map[string]Outcome{"charge": OutcomeApplied, "payment": OutcomeApplied,
			"refund": OutcomeRefund, "payment_refund": OutcomeRefund},
		Types:       []string{"charge", "payment", "refund", "payment_refund"},
		SkipKeyless: true,
	}
}

// AdyenSettlement is Adyen's settlement details report:
//
//	Company Account,Merchant Account,Psp Reference,Merchant Reference,Payment Method,Creation Date,TimeZone,Type,Modification Reference,Gross Currency,Gross Debit (GC),Gross Credit (GC),…
//
// The key is the Merchant Reference (the reference sent with the payment);
// the amount is Gross Credit (GC), or Gross Debit (GC) when the credit is
// empty, in decimal major units of Gross Currency, compared as a
// magnitude; Creation Date is "2006-01-02 15:04:05" in the row's TimeZone
// (CET, CEST, BST, UTC… or an IANA name); Psp Reference is the provider's
// reference. Type Settled is an applied charge, Refunded a refund of the
// same order (Adyen repeats the payment's Merchant Reference on its
// refunds); Fee, MerchantPayout, DepositCorrection, InvoiceDeduction,
// Chargeback and every other type are skipped and counted.
func AdyenSettlement() Layout {
	return Layout{
		Name: FormatAdyenSettlement,
		Columns: map[string]string{FieldKey: "Merchant Reference", FieldAmount: "Gross Credit (GC)",
			FieldDebit: "Gross Debit (GC)", FieldCurrency: "Gross Currency", FieldAppliedAt: "Creation Date",
			FieldTimeZone: "TimeZone", FieldType: "Type", FieldReference: "Psp Reference"},
		Amount:      money.Format{Unit: money.Major},
		Magnitude:   true,
		TimeLayouts: []string{time.DateTime},
		Statuses:    map[string]Outcome{"settled": OutcomeApplied, "refunded": OutcomeRefund},
		Types:       []string{"Settled", "Refunded"},
		SkipKeyless: true,
	}
}
