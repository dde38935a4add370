package csvprovider

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// zoneAbbrev holds the offsets of the zone abbreviations settlement reports
// write in a time-zone column (Adyen's TimeZone: "CET", "CEST", "BST").
// An abbreviation names an offset, not a zone with rules, so a fixed zone
// is exact for the row it stands on. Anything else is looked up as an IANA
// zone name ("Europe/Amsterdam").
var zoneAbbrev = map[string]int{
	"UTC": 0, "GMT": 0, "WET": 0,
	"BST": 1, "CET": 1, "WEST": 1,
	"CEST": 2, "EET": 2,
	"EEST": 3, "MSK": 3,
	"HKT": 8, "SGT": 8, "JST": 9, "KST": 9,
	"AEST": 10, "AEDT": 11, "NZST": 12, "NZDT": 13,
	"EDT": -4, "EST": -5, "CDT": -5, "MDT": -6, "MST": -7, "PDT": -7, "PST": -8,
	"AKDT": -8, "AKST": -9, "HST": -10,
}

var zones sync.Map // name → *time.Location

// zone returns the location a time-zone cell names.
func zone(name string) (*time.Location, error) {
	name = strings.TrimSpace(name)
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	var loc *time.Location
	if off, ok := zoneAbbrev[strings.ToUpper(name)]; ok {
		loc = time.FixedZone(strings.ToUpper(name), off*3600)
	} else {
		l, err := time.LoadLocation(name)
		if err != nil || name == "" || name == "Local" {
			return nil, fmt.Errorf("time zone %q is neither a known abbreviation nor an IANA zone", name)
		}
		loc = l
	}
	zones.Store(name, loc)
	return loc, nil
}
