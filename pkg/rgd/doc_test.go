package rgd

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestFunctionsTable keeps docs/kro.md's functions table true: every
// function it lists as supported is declared (or is a macro), every
// refused function is listed as refused, and kro's own functions are all
// listed.
func TestFunctionsTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/kro.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	start := strings.Index(page, "### Functions")
	end := strings.Index(page, "### Evaluation")
	if start < 0 || end < start {
		t.Fatal("docs/kro.md has no ### Functions section before ### Evaluation")
	}
	env, err := NewEnv(Declarations{})
	if err != nil {
		t.Fatal(err)
	}
	macros := map[string]bool{"has": true, "all": true, "exists": true, "exists_one": true, "map": true, "filter": true,
		"sortBy": true, "cel.bind": true, "existsOne": true, "transformList": true, "transformMap": true, "transformMapEntry": true}
	name := regexp.MustCompile("`([a-zA-Z_][a-zA-Z0-9_.]*)(?:\\(\\))?`")
	listed := map[string]bool{}
	for _, row := range strings.Split(page[start:end], "\n") {
		if !strings.HasPrefix(row, "| ") || strings.HasPrefix(row, "| Library") {
			continue
		}
		cells := strings.Split(row, "|")
		if len(cells) < 4 {
			continue
		}
		refused := strings.Contains(cells[3], "refused")
		for _, m := range name.FindAllStringSubmatch(cells[2], -1) {
			fn := m[1]
			listed[fn] = true
			_, isRefused := RefusedFunctions[fn]
			switch {
			case refused && !isRefused:
				t.Errorf("%s is listed as refused but is not in RefusedFunctions", fn)
			case !refused && isRefused:
				t.Errorf("%s is refused but listed as supported", fn)
			case !refused && !macros[fn] && !env.functions[fn]:
				t.Errorf("%s is listed as supported but not declared", fn)
			}
		}
	}
	for fn := range RefusedFunctions {
		if !listed[fn] {
			t.Errorf("refused function %s is not listed", fn)
		}
	}
	for _, fn := range []string{"hash.fnv64a", "hash.sha256", "hash.md5", "json.unmarshal", "json.marshal", "random.seededString",
		"random.seededInt", "merge", "deepMerge", "lists.setAtIndex", "lists.insertAtIndex", "lists.removeAtIndex", "omit"} {
		if !listed[fn] {
			t.Errorf("kro function %s is not listed", fn)
		}
	}
}
