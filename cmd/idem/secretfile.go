package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
)

// readSecretFile reads a secret (a token, a digest secret) from path, as
// every flag that names a secret file does: the file must not be readable
// or writable by other users — whoever reads a dashboard token can decide
// records, whoever writes one can log in — so a mode with any bit for
// others is refused, as the key files of --encryption-key-file are (see
// idem.LoadKeyring). Surrounding white space is trimmed.
func readSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o007 != 0 {
		return nil, fmt.Errorf("%s is accessible to other users (mode %v): chmod o= %s", path, fi.Mode().Perm(), path)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}
