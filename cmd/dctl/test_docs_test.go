package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fencedBlocks returns the fenced code blocks of a Markdown page, each
// without its fences, keyed by nothing: in page order, with their info
// strings.
func fencedBlocks(t *testing.T, page string) (infos, blocks []string) {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		info := strings.TrimSpace(strings.TrimPrefix(lines[i], "```"))
		var body strings.Builder
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			body.WriteString(lines[i])
		}
		infos = append(infos, info)
		blocks = append(blocks, body.String())
	}
	return infos, blocks
}

var durationRE = regexp.MustCompile(`\(\d+\.\d{3}s\)`)

// TestTestingPage checks that docs/testing.md shows the annotator's test
// file as it is, and the output dctl test prints for it and for the same
// test with a broken expectation; and that its CI command runs.
func TestTestingPage(t *testing.T) {
	infos, blocks := fencedBlocks(t, "../../docs/testing.md")
	file := "../../examples/pod-container-num-annotator/pod-container-num-annotator_test.yaml"
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	find := func(info, prefix string) string {
		for i, b := range blocks {
			if infos[i] == info && strings.HasPrefix(b, prefix) {
				return b
			}
		}
		t.Fatalf("docs/testing.md has no ```%s block starting with %q", info, prefix)
		return ""
	}
	if got := find("yaml", "# The annotator's expected results"); got != string(want) {
		t.Errorf("docs/testing.md does not show %s as it is:\n%s", file, got)
	}

	// The passing run.
	shown := find("console", "$ dctl test examples/pod-container-num-annotator\n")
	var stdout, stderr bytes.Buffer
	if code := Execute([]string{"test", "../../examples/pod-container-num-annotator"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	_, shownOut, _ := strings.Cut(shown, "\n")
	if norm(shownOut) != norm(stdout.String()) {
		t.Errorf("the page shows\n%s\ndctl test prints\n%s", shownOut, stdout.String())
	}

	// The failing run: the same test expecting "3".
	dir := t.TempDir()
	for _, f := range []string{"operator.yaml", "input.yaml", "expected.yaml"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(file), f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	broken := strings.Replace(string(want), `container-num: "2"}`, `container-num: "3"}`, 1)
	if broken == string(want) {
		t.Fatal("the example test no longer expects container-num \"2\"")
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(file)), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if code := Execute([]string{"test", dir}, nil, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1: %s%s", code, stdout.String(), stderr.String())
	}
	if shown := find("console", "FAIL pod-container-num-annotator"); norm(shown) != norm(stdout.String()) {
		t.Errorf("the page shows\n%s\ndctl test prints\n%s", shown, stdout.String())
	}

	// The CI example's command, on examples/.
	ci := find("yaml", "- name: Controller tests\n")
	m := regexp.MustCompile(`run: dctl (test .*)\n`).FindStringSubmatch(ci)
	if m == nil {
		t.Fatalf("no `run: dctl test` in the CI example:\n%s", ci)
	}
	args := strings.Fields(strings.Replace(m[1], "controllers/", "../../examples/", 1))
	for i, a := range args {
		if a == "dctl-test.xml" {
			args[i] = filepath.Join(t.TempDir(), a)
			defer func(p string) { readJUnit(t, p) }(args[i])
		}
	}
	// The webhook PodService's test needs its hook server.
	args = append(args, "--hook-url", "podservice-controller="+startPodServiceHook(t))
	stdout.Reset()
	if code := Execute(args, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("%v: exit %d: %s%s", args, code, stdout.String(), stderr.String())
	}
}

func norm(s string) string { return durationRE.ReplaceAllString(s, "(Xs)") }
