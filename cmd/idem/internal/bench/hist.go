package bench

import (
	"math"
	"time"
)

// hist is a latency histogram with logarithmic buckets about 2% wide, from
// 100ns to beyond a minute. Each worker fills its own; they are merged at
// the end of a cell. Memory is fixed whatever the throughput.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
}

const (
	histMin     = 100 * time.Nanosecond
	histGrowth  = 1.02
	histBuckets = 1400 // 100ns · 1.02^1400 ≈ 10^12 ns: far past any cell
)

var logGrowth = math.Log(histGrowth)

func bucketOf(d time.Duration) int {
	if d <= histMin {
		return 0
	}
	b := int(math.Log(float64(d)/float64(histMin))/logGrowth) + 1
	return min(b, histBuckets-1)
}

// upper is the largest duration that falls in bucket b.
func upper(b int) time.Duration {
	return time.Duration(float64(histMin) * math.Pow(histGrowth, float64(b)))
}

func (h *hist) add(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.n++
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the upper bound of the bucket holding quantile q
// (0 < q ≤ 1), so it overstates by at most one bucket (2%).
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return upper(i)
		}
	}
	return upper(histBuckets - 1)
}
