package dtest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Discover returns the test files under paths, sorted and without
// duplicates. A path that is a file is a test file whatever its name; a
// directory is searched recursively (directories whose names start with
// "." are skipped) for files named *_test.yaml or *_test.yml, and for the
// *.yaml and *.yml files directly in a directory named tests (the files of
// its subdirectories are not tests: fixtures go there). A path that does
// not exist is an error.
func Discover(paths []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, root := range paths {
		st, err := os.Stat(root)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			add(filepath.Clean(root))
			continue
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != root && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if IsTestFile(p) {
				add(p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("searching %s for tests: %w", root, err)
		}
	}
	sort.Strings(out)
	return out, nil
}

// IsTestFile reports whether Discover takes the file at path for a test
// file by its name.
func IsTestFile(path string) bool {
	name := filepath.Base(path)
	ext := filepath.Ext(name)
	if ext != ".yaml" && ext != ".yml" {
		return false
	}
	if strings.HasSuffix(strings.TrimSuffix(name, ext), "_test") {
		return true
	}
	return filepath.Base(filepath.Dir(path)) == "tests"
}
