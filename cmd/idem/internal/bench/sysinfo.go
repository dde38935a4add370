package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// loadAvg returns the 1, 5 and 15 minute load averages as written in
// /proc/loadavg, or "" where there is none.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// procStatusKiB returns a kB field of /proc/self/status (VmRSS, VmHWM).
func procStatusKiB(field string) (int64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// resetPeakRSS resets VmHWM to the current RSS (Linux ≥ 4.0), so that a
// later VmHWM is the peak of what follows, not of the whole process.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}
