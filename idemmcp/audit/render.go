package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// WriteTable writes the report as an aligned table followed by a one-line
// summary.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "VERDICT\tTOOL\tREAD-ONLY\tKEY\tREASON\n")
	for _, f := range r.Tools {
		verdict := "ok"
		if f.Flagged {
			verdict = "FLAG"
		}
		key := f.KeyParam
		if key == "" {
			key = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", verdict, f.Name, yesNo(f.ReadOnly), key, f.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s: %s, %d flagged\n", r.serverLabel(), plural(len(r.Tools), "tool"), r.Flagged)
	return err
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *Report) serverLabel() string {
	switch {
	case r.Server == "":
		return "server"
	case r.ServerVersion == "":
		return r.Server
	}
	return r.Server + " " + r.ServerVersion
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
