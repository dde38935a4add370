package idemhttp

import (
	"bytes"
	"net/http"
)

// recorder passes a handler's response through to the client as it is
// written (so streaming and flushing work) and keeps a copy, up to max
// bytes, to record.
type recorder struct {
	w     http.ResponseWriter
	allow map[string]bool
	max   int64

	wrote    bool
	status   int
	header   http.Header
	body     bytes.Buffer
	size     int64
	tooLarge bool
}

func newRecorder(w http.ResponseWriter, allow map[string]bool, max int64) *recorder {
	return &recorder{w: w, allow: allow, max: max}
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
	r.wrote = true
	r.status = code
	r.header = snapshot(r.w.Header(), r.allow)
	r.w.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	n, err := r.w.Write(p)
	r.size += int64(n)
	if !r.tooLarge {
		if int64(r.body.Len())+int64(n) > r.max {
			// Never keep a truncated body: a replay would serve it as whole.
			r.tooLarge = true
			r.body = bytes.Buffer{}
		} else {
			r.body.Write(p[:n])
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

// response returns what the handler sent, as recorded.
func (r *recorder) response() *RecordedResponse {
	if !r.wrote {
		// A handler that wrote nothing answers 200 with no body.
		r.status = http.StatusOK
		r.header = snapshot(r.w.Header(), r.allow)
	}
	rr := &RecordedResponse{Status: r.status, Header: r.header, Size: r.size}
	if r.tooLarge {
		rr.TooLarge = true
	} else if r.body.Len() > 0 {
		rr.Body = bytes.Clone(r.body.Bytes())
	}
	if len(rr.Header) == 0 {
		rr.Header = nil
	}
	return rr
}
