package mutation

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// prepareScratch copies cfg.Root into the scratch directory and returns
// it, with the clean-up to run after the mutations.
func prepareScratch(cfg Config) (dir string, cleanup func(), err error) {
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return "", nil, err
	}
	dir, made := cfg.Scratch, false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "mutation-"); err != nil {
			return "", nil, err
		}
		made = true
	} else {
		if dir, err = filepath.Abs(dir); err != nil {
			return "", nil, err
		}
		ents, err := os.ReadDir(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return "", nil, err
			}
			made = true
		case err != nil:
			return "", nil, err
		case len(ents) > 0:
			return "", nil, fmt.Errorf("mutation: scratch directory %s is not empty", dir)
		}
	}
	cleanup = func() {
		switch {
		case cfg.Keep:
		case made:
			_ = os.RemoveAll(dir)
		default: // the caller's directory: empty it
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				_ = os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
	if err := copyTree(root, dir, cfg.Exclude); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("mutation: copying %s: %w", root, err)
	}
	return dir, cleanup, nil
}

// copyTree copies the files of src into dst (which exists), skipping .git,
// the names in exclude and dst itself when it lies inside src. Symbolic
// links are copied as links; modes are kept.
func copyTree(src, dst string, exclude []string) error {
	skip := map[string]bool{".git": true}
	for _, e := range exclude {
		skip[e] = true
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if skip[d.Name()] || samePath(p, dst) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case d.Type().IsRegular():
			return copyFile(p, target, info.Mode().Perm())
		}
		return nil // sockets, devices: nothing a build reads
	})
}

func samePath(a, b string) bool { return filepath.Clean(a) == filepath.Clean(b) }

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
