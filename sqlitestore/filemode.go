package sqlitestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// FileMode is the permission a new database file is created with. SQLite
// gives its -wal and -shm files the database file's permissions, so all
// three are readable by their owner only: recorded request and response
// bodies are no other local user's business. A file that already exists
// keeps its permissions.
const FileMode fs.FileMode = 0o600

// createPrivate creates path with FileMode when it does not exist yet, so
// that the driver opens a file whose permissions are already right instead
// of creating one under the process umask (0644 typically).
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return fmt.Errorf("sqlitestore: create %s: %w", path, err)
	}
	return f.Close()
}
