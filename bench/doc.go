// Package bench holds go test benchmarks of idem's own CPU cost, with no
// store latency in the way: the HTTP middleware over the in-memory store
// (ns/op, allocs/op per first-time request and per replay), and replays
// through the proxy composition (middleware in front of
// httputil.ReverseProxy) against a plain httputil.ReverseProxy forwarding to
// the same trivial upstream, side by side in one run.
//
// It has no API. Run it with
//
//	go test -run '^$' -bench . -benchmem -count 10 ./bench | tee new.txt
//	benchstat old.txt new.txt
//
// and see docs/performance.md for the recipe and the figures measured.
package bench
