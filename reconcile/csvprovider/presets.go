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
	return Layout{}, fmt.Errorf("unknown format %q (want csv, stripe-balance or adyen-settlement)", name)
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

// StripeBalance reads Stripe's balance reports, by their headers:
//
//   - the Dashboard's balance export (Balance → Export):
//     id,Type,Source,Amount,Fee,Net,Currency,Created (UTC),…,idempotency_key (metadata)
//   - the itemized balance change report (balance_change_from_activity.itemized.N)
//     and the itemized payout reconciliation report
//     (payout_reconciliation.itemized.N), from the Report API or the
//     Dashboard's reports: balance_transaction_id,created_utc,…,currency,
//     gross,fee,net,reporting_category,source_id,…,payment_metadata[idempotency_key]
//
// The key is the metadata column "idempotency_key (metadata)" or
// "payment_metadata[idempotency_key]" (the payment's metadata, on its
// refunds too; map another with key=COLUMN). Amounts (Amount or gross) are
// decimal major units ("50.00", "-5.00", "5000" for JPY; a ',' between
// thousands is accepted), compared as magnitudes. Currency is lower case.
// Created (UTC) or created_utc is "2006-01-02 15:04:05" (or without
// seconds) in UTC. Source or source_id is the provider's reference. Type
// (or reporting_category) charge and payment are applied charges, refund
// and payment_refund refunds of the same order; every other type
// (payout, stripe_fee, fee, adjustment, other_adjustment, dispute,
// transfer…) is skipped and counted, and so is a row with no key.
//
// ISK is read with two decimals, as Stripe's API counts it (an amount of
// 100 is 1 ISK; ISO 4217 gives it none): amounts are compared in the minor
// units the application sent Stripe.
func StripeBalance() Layout {
	return Layout{
		Name: FormatStripeBalance,
		Columns: map[string]string{FieldKey: "idempotency_key (metadata)", FieldAmount: "Amount",
			FieldCurrency: "Currency", FieldAppliedAt: "Created (UTC)", FieldType: "Type", FieldReference: "Source"},
		Alternates: map[string][]string{FieldKey: {"payment_metadata[idempotency_key]"}, FieldAmount: {"gross"},
			FieldAppliedAt: {"created_utc"}, FieldType: {"reporting_category"}, FieldReference: {"source_id"}},
		Amount:      money.Format{Unit: money.Major, Thousands: ','},
		Exponents:   money.Exponents{"ISK": 2},
		Magnitude:   true,
		TimeLayouts: []string{time.DateTime, "2006-01-02 15:04"},
		Location:    time.UTC,
		Statuses: map[string]Outcome{"charge": OutcomeApplied, "payment": OutcomeApplied,
			"refund": OutcomeRefund, "payment_refund": OutcomeRefund},
		Types:       []string{"charge", "payment", "refund", "payment_refund"},
		SkipKeyless: true,
	}
}

// AdyenSettlement is Adyen's Settlement details report:
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
// refunds); Fee, MiscCosts, MerchantPayout, DepositCorrection,
// InvoiceDeduction, Chargeback and every other type are skipped and
// counted.
//
// CLP and ISK are read with two decimals and CVE and IDR with none, as
// Adyen's API counts them (its currency codes page; ISO 4217 differs for
// these four): amounts are compared in the minor units the application
// sent Adyen.
func AdyenSettlement() Layout {
	return Layout{
		Name: FormatAdyenSettlement,
		Columns: map[string]string{FieldKey: "Merchant Reference", FieldAmount: "Gross Credit (GC)",
			FieldDebit: "Gross Debit (GC)", FieldCurrency: "Gross Currency", FieldAppliedAt: "Creation Date",
			FieldTimeZone: "TimeZone", FieldType: "Type", FieldReference: "Psp Reference"},
		Amount:      money.Format{Unit: money.Major},
		Exponents:   money.Exponents{"CLP": 2, "ISK": 2, "CVE": 0, "IDR": 0},
		Magnitude:   true,
		TimeLayouts: []string{time.DateTime},
		Statuses:    map[string]Outcome{"settled": OutcomeApplied, "refunded": OutcomeRefund},
		Types:       []string{"Settled", "Refunded"},
		SkipKeyless: true,
	}
}
