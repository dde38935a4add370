package money

// This file is the ISO 4217 table kept in the project: every currency and
// fund code with its minor units (the number of decimal digits of an
// amount). It replaces CLDR's currency data, which disagrees with ISO 4217
// for about twenty currencies (CLDR gives COP, IDR and IQD no decimals) and
// lacks the codes of recent redenominations (MRU, SLE, VED, VES, ZWG).
//
// current is ISO 4217 List One as published by its maintenance agency
// (SIX) on 2024-06-25; testdata/iso4217-list-one.xml is that list and
// TestTableMatchesPublishedList checks every entry against it. -1 marks
// the codes the list gives no minor unit ("N.A.": precious metals, units
// of account, XTS, XXX): an amount in them has no minor units to count.
var current = map[string]int{
	"AED": 2, "AFN": 2, "ALL": 2, "AMD": 2, "ANG": 2, "AOA": 2, "ARS": 2, "AUD": 2,
	"AWG": 2, "AZN": 2, "BAM": 2, "BBD": 2, "BDT": 2, "BGN": 2, "BHD": 3, "BIF": 0,
	"BMD": 2, "BND": 2, "BOB": 2, "BOV": 2, "BRL": 2, "BSD": 2, "BTN": 2, "BWP": 2,
	"BYN": 2, "BZD": 2, "CAD": 2, "CDF": 2, "CHE": 2, "CHF": 2, "CHW": 2, "CLF": 4,
	"CLP": 0, "CNY": 2, "COP": 2, "COU": 2, "CRC": 2, "CUC": 2, "CUP": 2, "CVE": 2,
	"CZK": 2, "DJF": 0, "DKK": 2, "DOP": 2, "DZD": 2, "EGP": 2, "ERN": 2, "ETB": 2,
	"EUR": 2, "FJD": 2, "FKP": 2, "GBP": 2, "GEL": 2, "GHS": 2, "GIP": 2, "GMD": 2,
	"GNF": 0, "GTQ": 2, "GYD": 2, "HKD": 2, "HNL": 2, "HTG": 2, "HUF": 2, "IDR": 2,
	"ILS": 2, "INR": 2, "IQD": 3, "IRR": 2, "ISK": 0, "JMD": 2, "JOD": 3, "JPY": 0,
	"KES": 2, "KGS": 2, "KHR": 2, "KMF": 0, "KPW": 2, "KRW": 0, "KWD": 3, "KYD": 2,
	"KZT": 2, "LAK": 2, "LBP": 2, "LKR": 2, "LRD": 2, "LSL": 2, "LYD": 3, "MAD": 2,
	"MDL": 2, "MGA": 2, "MKD": 2, "MMK": 2, "MNT": 2, "MOP": 2, "MRU": 2, "MUR": 2,
	"MVR": 2, "MWK": 2, "MXN": 2, "MXV": 2, "MYR": 2, "MZN": 2, "NAD": 2, "NGN": 2,
	"NIO": 2, "NOK": 2, "NPR": 2, "NZD": 2, "OMR": 3, "PAB": 2, "PEN": 2, "PGK": 2,
	"PHP": 2, "PKR": 2, "PLN": 2, "PYG": 0, "QAR": 2, "RON": 2, "RSD": 2, "RUB": 2,
	"RWF": 0, "SAR": 2, "SBD": 2, "SCR": 2, "SDG": 2, "SEK": 2, "SGD": 2, "SHP": 2,
	"SLE": 2, "SOS": 2, "SRD": 2, "SSP": 2, "STN": 2, "SVC": 2, "SYP": 2, "SZL": 2,
	"THB": 2, "TJS": 2, "TMT": 2, "TND": 3, "TOP": 2, "TRY": 2, "TTD": 2, "TWD": 2,
	"TZS": 2, "UAH": 2, "UGX": 0, "USD": 2, "USN": 2, "UYI": 0, "UYU": 2, "UYW": 4,
	"UZS": 2, "VED": 2, "VES": 2, "VND": 0, "VUV": 0, "WST": 2, "XAF": 0, "XAG": -1,
	"XAU": -1, "XBA": -1, "XBB": -1, "XBC": -1, "XBD": -1, "XCD": 2, "XDR": -1, "XOF": 0,
	"XPD": -1, "XPF": 0, "XPT": -1, "XSU": -1, "XTS": -1, "XUA": -1, "XXX": -1, "YER": 2,
	"ZAR": 2, "ZMW": 2, "ZWG": 2,
}

// later holds codes ISO 4217 added after the list in testdata.
var later = map[string]int{
	// Caribbean guilder (amendment 176), in use from 2025-03-31 in Curaçao
	// and Sint Maarten, replacing ANG (which stays in the table).
	"XCG": 2,
}

// withdrawn holds codes ISO 4217 has withdrawn (List Three) that
// providers still send: a redenomination leaves old balances, refunds of
// old payments and reports of earlier periods in the old code. Each keeps
// the minor units List One gave it while it was current.
var withdrawn = map[string]int{
	"BYR": 0, // Belarusian ruble, → BYN 2016-07
	"HRK": 2, // Croatian kuna, → EUR 2023-01
	"LTL": 2, // Lithuanian litas, → EUR 2015-01
	"LVL": 2, // Latvian lats, → EUR 2014-01
	"MRO": 2, // Mauritanian ouguiya, → MRU 2018-01
	"SLL": 2, // Sierra Leonean leone, → SLE 2023-07
	"STD": 2, // São Tomé and Príncipe dobra, → STN 2018-01
	"VEF": 2, // Venezuelan bolívar fuerte, → VES 2018-08
	"ZMK": 2, // Zambian kwacha, → ZMW 2013-01
	"ZWL": 2, // Zimbabwe dollar, → ZWG 2024-06
}

// digits returns the minor units of an upper-case code from the three
// tables, and whether the code is in them.
func digits(cur string) (int, bool) {
	if d, ok := current[cur]; ok {
		return d, true
	}
	if d, ok := later[cur]; ok {
		return d, true
	}
	d, ok := withdrawn[cur]
	return d, ok
}
