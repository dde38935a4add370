package idemhttp

import (
	"net/http"
	"slices"
)

// recordBufSize is the initial capacity of a recording: the prelude and a
// small body fit without growing.
const recordBufSize = 512

// recorder passes a handler's response through to the client as it is
// written (so streaming and flushing work) and keeps a copy, up to max
// bytes, to record. The copy is encoded as it is written: the prelude
// (status and allow-listed headers, snapshot when the status is sent) and
// then the body, straight into the record's bytes.
type recorder struct {
	w     http.ResponseWriter
	allow map[string]bool
	max   int64

	wrote    bool
	status   int
	buf      []byte // the record being built
	bodyOff  int    // where the body starts in buf
	size     int64
	tooLarge bool
}

func (r *recorder) reset(w http.ResponseWriter, allow map[string]bool, max int64) {
	*r = recorder{w: w, allow: allow, max: max}
}

func (r *recorder) Header() http.Header { return r.w.Header() }

func (r *recorder) WriteHeader(code int) {
	if r.wrote {
		r.w.WriteHeader(code) // superfluous: net/http logs it
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		r.w.WriteHeader(code) // informational: sent, not the final status
		return
	}
	r.snapshot(code)
	r.w.WriteHeader(code)
}

// snapshot records the final status and the allow-listed headers as they
// are when the status is sent.
func (r *recorder) snapshot(code int) {
	r.wrote = true
	r.status = code
	h := r.w.Header()
	var arr [16]string
	names := arr[:0]
	for k := range h {
		if r.allow[k] {
			names = append(names, k)
		}
	}
	r.buf = appendPrelude(make([]byte, 0, recordBufSize), code, h, names)
	r.bodyOff = len(r.buf)
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	n, err := r.w.Write(p)
	r.size += int64(n)
	if !r.tooLarge {
		if int64(len(r.buf)-r.bodyOff)+int64(n) > r.max {
			// Never keep a truncated body: a replay would serve it as whole.
			r.tooLarge = true
			r.buf = slices.Clone(r.buf[:r.bodyOff]) // and free the body's memory
		} else {
			r.buf = append(r.buf, p[:n]...)
		}
	}
	return n, err
}

// Flush sends what was written so far; handlers that stream keep working.
func (r *recorder) Flush() {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(r.w).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer (for
// deadlines). A handler that hijacks the connection leaves nothing to record.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// finalStatus is the status the client got: 200 when the handler wrote
// nothing.
func (r *recorder) finalStatus() int {
	if !r.wrote {
		return http.StatusOK
	}
	return r.status
}

// record returns the encoded response. A handler that wrote nothing
// answers 200 with no body, with the headers it set.
func (r *recorder) record() []byte {
	if !r.wrote {
		r.snapshot(http.StatusOK)
	}
	if r.tooLarge {
		return markTooLarge(r.buf[:r.bodyOff], r.size)
	}
	return r.buf
}
