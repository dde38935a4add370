package ui

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sample is one scrape of a proxy's /metrics: idem_requests_total summed
// by outcome over operations, and idem_duplicate_ratio.
type sample struct {
	at        time.Time
	outcomes  map[string]float64
	dupRatio  float64
	hasRatio  bool
	scrapeErr string
}

// sampler scrapes a Prometheus text endpoint on a schedule and keeps the
// last n samples, from which the overview draws outcomes over time.
type sampler struct {
	url    string
	client *http.Client
	mu     sync.Mutex
	ring   []sample
	n      int
}

func newSampler(url string, n int) *sampler {
	return &sampler{url: url, n: n, client: &http.Client{Timeout: 5 * time.Second}}
}

func (m *sampler) run(ctx context.Context, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := m.scrape(ctx); err != nil && ctx.Err() == nil {
			log.Warn("idem ui: metrics scrape failed", "url", m.url, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *sampler) scrape(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return err
	}
	resp, err := m.client.Do(req)
	var s sample
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s answered %s", m.url, resp.Status)
		} else {
			s, err = parseMetrics(io.LimitReader(resp.Body, 8<<20))
		}
	}
	s.at = time.Now()
	if err != nil {
		s = sample{at: s.at, scrapeErr: err.Error()}
	}
	m.mu.Lock()
	m.ring = append(m.ring, s)
	if len(m.ring) > m.n {
		m.ring = m.ring[len(m.ring)-m.n:]
	}
	m.mu.Unlock()
	return err
}

func (m *sampler) samples() []sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]sample(nil), m.ring...)
}

// parseMetrics reads the two idem metrics the overview shows from the
// Prometheus text format.
func parseMetrics(r io.Reader) (sample, error) {
	s := sample{outcomes: map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, ok := splitSample(line)
		if !ok {
			continue
		}
		switch name {
		case "idem_requests_total":
			seen = true
			s.outcomes[labelValue(labels, "outcome")] += value
		case "idem_duplicate_ratio":
			s.dupRatio, s.hasRatio = value, true
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	if !seen && !s.hasRatio {
		return s, fmt.Errorf("no idem_requests_total or idem_duplicate_ratio in the answer: is this an idem proxy's /metrics?")
	}
	return s, nil
}

// splitSample splits `name{labels} value [timestamp]`.
func splitSample(line string) (name, labels string, value float64, ok bool) {
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", "", 0, false
		}
		name, labels, rest = line[:i], line[i+1:j], strings.TrimSpace(line[j+1:])
	} else {
		sp := strings.IndexAny(line, " \t")
		if sp < 0 {
			return "", "", 0, false
		}
		name, rest = line[:sp], strings.TrimSpace(line[sp:])
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", "", 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return name, labels, v, err == nil
}

// labelValue finds name="value" in a label set (values in idem's metrics
// carry no escaped quotes).
func labelValue(labels, name string) string {
	for _, p := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}
