package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemkit/idem/internal/testenv"
)

// TestDynamoMigrateAndDoctor: idem migrate creates the table on dynalite
// (a second run finds it up to date), and idem doctor checks it: the
// table fits, TTL (which dynalite lacks) and deletion protection are
// warnings (exit 3), the replication is a one-region table's.
func TestDynamoMigrateAndDoctor(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	dsn := "dynamodb://idem-cli?endpoint=" + testenv.StartDynalite(t)
	o, e, code := runCLI("migrate", "--store", dsn)
	if code != exitOK || !strings.Contains(o, "to 1") {
		t.Fatalf("migrate: %d %q %q", code, o, e)
	}
	o, e, code = runCLI("migrate", "--store", dsn)
	if code != exitOK || !strings.Contains(o, "up to date at version 1") {
		t.Fatalf("second migrate: %d %q %q", code, o, e)
	}
	o, e, code = runCLI("doctor", "--json", "--store", dsn)
	if code != 3 {
		t.Fatalf("doctor: %d %q %q; want 3 (warnings)", code, o, e)
	}
	var rep struct {
		Checks []struct {
			Name     string `json:"name"`
			OK       string `json:"ok"`
			Findings []struct {
				Setting  string `json:"setting"`
				Severity string `json:"severity"`
			} `json:"findings"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(o), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, o)
	}
	var settings []string
	for _, c := range rep.Checks {
		// DynamoDB has no clock to read: doctor must not call it local.
		if c.Name == "clock" && !strings.Contains(c.OK, "no clock idem can read") {
			t.Errorf("clock: %q, want the store named as having no clock", c.OK)
		}
		for _, f := range c.Findings {
			if f.Severity != "warning" {
				t.Errorf("%s: %s is %s, want warning", c.Name, f.Setting, f.Severity)
			}
			settings = append(settings, f.Setting)
		}
	}
	if got := strings.Join(settings, ","); got != "TimeToLive,DeletionProtectionEnabled" {
		t.Fatalf("findings %s, want TimeToLive,DeletionProtectionEnabled\n%s", got, o)
	}
}
