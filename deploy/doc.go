// Package deploy holds deployment files for idem (Prometheus alerting rules
// in alerts.yml) and the tests that validate them. It has no Go API.
package deploy
