package idemprom_test

import (
	"context"
	"fmt"
	"log"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/memstore"
)

// The observer goes into idem.Config; every engine call then counts in
// idem_requests_total by operation and outcome. In a service, reg is the
// registry your /metrics handler serves.
func ExampleNew() {
	reg := prometheus.NewRegistry()
	obs, err := idemprom.New(reg)
	if err != nil {
		log.Fatal(err)
	}
	engine, err := idem.New(memstore.New(), idem.Config{Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Close()

	ctx := context.Background()
	req := idem.Request{Scope: "tenant-42", Key: "charge:v1:order-123:1", Operation: "charge"}
	charge := func(context.Context, *idem.Attempt) ([]byte, error) { return []byte("ch_1"), nil }
	for range 2 { // the first call runs the charge, the retry replays it
		if _, err := engine.DoBytes(ctx, req, charge); err != nil {
			log.Fatal(err)
		}
	}

	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range families {
		switch mf.GetName() {
		case "idem_requests_total":
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, lp := range m.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				fmt.Printf("%s{operation=%q,outcome=%q} %v\n", mf.GetName(),
					labels["operation"], labels["outcome"], m.GetCounter().GetValue())
			}
		case "idem_duplicate_ratio":
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output:
	// idem_duplicate_ratio 0.5
	// idem_requests_total{operation="charge",outcome="first"} 1
	// idem_requests_total{operation="charge",outcome="replay"} 1
}
