package operator

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

// fuzzBranchForm: an input whose first byte is at or above it decodes as a
// controller with a targets: list and a pipeline in branch form
// (decodeBranchForm); below it, as a controller with one target: and a
// plain pipeline (the inputs from before the branch form decode as they
// did).
const fuzzBranchForm = 0x80

// fuzzTargetSlots are the targets a branch-form controller picks from: two
// kinds, and a second target of kind Out named apart (two targets of one
// kind own their objects apart).
var fuzzTargetSlots = []struct{ name, kind string }{{"Out", "Out"}, {"Res", "Res"}, {"o2", "Out"}}

// fuzzTargetLayouts are the slots of the targets of a controller, in spec
// order.
var fuzzTargetLayouts = [][]int{{0, 1}, {0, 2}, {0, 1, 2}, {1, 2}}

var fuzzTargetTypes = []opv1a1.TargetType{opv1a1.Updater, opv1a1.Patcher, opv1a1.Applier}

// fuzzStatus are the status expressions of a target's output, over the
// document a branch built: none; one always set whose values change; one
// whose field "note" comes and goes with an annotation of the source; one
// that is null (no status) unless spec.v is set and nonzero. A Patcher
// never takes the last: a null status in a merge patch (RFC 7386) deletes
// the status of the object, fields the Patcher does not own included,
// which no later patch can restore. No field is ever null: an Applier
// offline patches (StoreClient.Apply), and a null in a patch removes the
// field that a create would have stored as null.
var fuzzStatus = []string{
	``,
	`{"v": {"@definedOr": ["$.spec.v", -1]}, "k": {"@definedOr": ["$.spec.k", -1]}}`,
	`{"@cond": [{"@exists": "$.metadata.annotations.note"}, {"note": "$.metadata.annotations.note", "n": {"@len": {"@definedOr": ["$.spec.list", []]}}}, {"n": {"@len": {"@definedOr": ["$.spec.list", []]}}}]}`,
	`{"@cond": [{"@eq": [{"@definedOr": ["$.spec.v", 0]}, 0]}, null, {"v": "$.spec.v", "ready": true}]}`,
}

// fuzzBranchJoin returns the stages of a branch over the inputs x and y,
// joined by the i-th condition of fuzzJoins (read over x and y), with y
// soft (a left join) when softY, x when softX, and projected back to one
// object as fuzzJoinProject does, with defaults for what the side a left
// join left null would give (no field is null, see fuzzStatus);
// spec.matched says whether both sides are there.
func fuzzBranchJoin(i int, x, y string, softX, softY bool) []string {
	cond := strings.NewReplacer("$.A.", "$."+x+".", "$.B.", "$."+y+".").Replace(fuzzJoins[i])
	join := `{"@join": ` + cond + `}`
	switch {
	case softY:
		join = fmt.Sprintf(`{"@join": [%s, {"soft": [%q]}]}`, cond, y)
	case softX:
		join = fmt.Sprintf(`{"@join": [%s, {"soft": [%q]}]}`, cond, x)
	}
	r := strings.NewReplacer("X", x, "Y", y)
	project := r.Replace(`{"@project": {"metadata": {` +
		`"name": {"@concat": [{"@definedOr": ["$.X.metadata.name", "none"]}, "-", {"@definedOr": ["$.Y.metadata.name", "none"]}]}, ` +
		`"namespace": {"@definedOr": ["$.X.metadata.namespace", "$.Y.metadata.namespace"]}, ` +
		`"labels": {"@definedOr": ["$.X.metadata.labels", {}]}, "annotations": {"@definedOr": ["$.Y.metadata.annotations", {}]}}, ` +
		`"spec": {"k": {"@definedOr": ["$.X.spec.k", "$.Y.spec.k"]}, "v": {"@definedOr": ["$.Y.spec.v", -1]}, "list": {"@definedOr": ["$.X.spec.list", []]}, ` +
		`"matched": {"@and": [{"@exists": "$.X.metadata.name"}, {"@exists": "$.Y.metadata.name"}]}}}}`)
	return []string{join, project}
}

// fuzzBranchOutput is the last @project of a branch j writing target
// name: an Updater's and an Applier's objects are named <name>-<j>-<input
// name>, so that the branches unioned into one target and two targets of
// one kind write apart; a Patcher's outputs map to its pre-existing
// objects ns0/<name>-t0..2 (see fuzzPatchTarget). status is a fuzzStatus
// expression ("" for none).
func fuzzBranchOutput(name string, j int, typ opv1a1.TargetType, status string) string {
	prefix := strings.ToLower(name)
	st := ""
	if status != "" {
		st = `, "status": ` + status
	}
	if typ == opv1a1.Patcher {
		return `{"@project": {"metadata": {"name": {"@concat": ["` + prefix + `-t", {"@string": {"@definedOr": ["$.spec.k", 0]}}]}, "namespace": "ns0", ` +
			`"labels": {"@definedOr": ["$.metadata.labels", {}]}, "annotations": {"@definedOr": ["$.metadata.annotations", {}]}}, ` +
			`"spec": {"v": "$.spec.v", "list": "$.spec.list"}` + st + `}}`
	}
	return fmt.Sprintf(`{"@project": {"metadata": {"name": {"@concat": ["%s-%d-", "$.metadata.name"]}, "namespace": "$.metadata.namespace", `+
		`"labels": {"@definedOr": ["$.metadata.labels", {}]}, "annotations": {"@definedOr": ["$.metadata.annotations", {}]}}, "spec": "$.spec"%s}}`, prefix, j, st)
}

// fuzzStageList returns n stages of fuzzStages picked by f, a list-valued
// entry spliced in.
func fuzzStageList(f *fuzzBytes, n int) []string {
	var out []string
	for ; n > 0; n-- {
		s := fuzzStages[f.pick(len(fuzzStages))]
		if strings.HasPrefix(s, "[") {
			s = s[1 : len(s)-1]
		}
		out = append(out, s)
	}
	return out
}

// decodeBranchForm decodes a controller over the sources A and B with two
// or three targets (fuzzTargetLayouts: of two kinds, or two of kind Out
// named apart) of random types, each kind with or without the status
// subresource, and a pipeline in branch form: an optional stream s (from A
// or B) that the first two targets' first branches read; per target one
// branch, or two unioned into it, each over one input or two joined (an
// inner join, or a left join with either side soft), random stages, and a
// last projection with a random status (fuzzStatus). It returns the case
// without steps and the source kinds.
func decodeBranchForm(f *fuzzBytes) (*fuzzCase, []string) {
	sources := []string{"A", "B"}
	fc := &fuzzCase{status: map[string]bool{}}
	layout := fuzzTargetLayouts[f.pick(len(fuzzTargetLayouts))]
	sub := f.next()
	fc.status["Out"], fc.status["Res"] = sub&1 != 0, sub&2 != 0
	var targets []opv1a1.Target
	for _, slot := range layout {
		s := fuzzTargetSlots[slot]
		t := opv1a1.Target{Resource: opv1a1.Resource{APIGroup: &fuzzGroup, Version: strPtr("v1"), Kind: s.kind},
			Type: fuzzTargetTypes[f.pick(len(fuzzTargetTypes))]}
		if s.name != s.kind {
			t.Name = s.name
		} else if s.kind == "Out" && f.pick(2) == 1 {
			t.Name = "o1" // both targets of kind Out named
		}
		targets = append(targets, t)
	}
	var branches []string
	branch := func(inputs []string, stages []string, output string) {
		in, _ := json.Marshal(inputs)
		out, _ := json.Marshal(output)
		branches = append(branches, "["+strings.Join(append(append([]string{`{"@inputs": ` + string(in) + `}`}, stages...), `{"@output": `+string(out)+`}`), ", ")+"]")
	}
	stream := f.pick(2) == 0
	if stream {
		branch([]string{sources[f.pick(2)]}, fuzzStageList(f, f.pick(3)), "s")
	}
	for i, t := range targets {
		name := t.Name
		if name == "" {
			name = t.Kind
		}
		status := fuzzStatus[f.pick(len(fuzzStatus))]
		if t.Type == opv1a1.Patcher && status == fuzzStatus[3] {
			status = fuzzStatus[2]
		}
		for j, n := 0, 1+f.pick(2); j < n; j++ {
			x := sources[f.pick(2)]
			if stream && i < 2 && j == 0 {
				x = "s"
			}
			var stages []string
			inputs := []string{x}
			switch form := f.pick(5); form {
			case 0, 1: // one input
			default: // a join with the other source kind: inner, y soft, x soft
				y := "B"
				if x == "B" {
					y = "A"
				}
				inputs = append(inputs, y)
				stages = fuzzBranchJoin(f.pick(len(fuzzJoins)), x, y, form == 4, form == 3)
			}
			stages = append(stages, fuzzStageList(f, f.pick(3))...)
			stages = append(stages, fuzzBranchOutput(name, j, t.Type, status))
			branch(inputs, stages, name)
		}
		if t.Type == opv1a1.Applier {
			fc.released = append(fc.released, strings.ToLower(name)+"-")
		}
		if t.Type == opv1a1.Patcher {
			fc.existing = append(fc.existing, patchTargetsOf(t.Kind, strings.ToLower(name)+"-t")...)
		}
	}
	spec := opv1a1.Controller{Name: "c", Targets: targets,
		Pipeline: apiextensionsv1.JSON{Raw: []byte("[" + strings.Join(branches, ",\n") + "]")}}
	for _, kind := range sources {
		spec.Sources = append(spec.Sources, opv1a1.Source{Resource: opv1a1.Resource{APIGroup: &fuzzGroup, Version: strPtr("v1"), Kind: kind}})
	}
	fc.op = &opv1a1.Operator{ObjectMeta: metav1.ObjectMeta{Name: "fuzz"}, Spec: opv1a1.OperatorSpec{Controllers: []opv1a1.Controller{spec}}}
	return fc, sources
}

// patchTargetsOf are the pre-existing objects ns0/<prefix>0..2 of kind of
// a Patcher target, with fields the pipelines never set, a status among
// them (so removing what a patch set restores them).
func patchTargetsOf(kind, prefix string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for i := 0; i < 3; i++ {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"pre": int64(i)}, "status": map[string]any{"pre": int64(i)}}}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: fuzzGroup, Version: "v1", Kind: kind})
		u.SetNamespace("ns0")
		u.SetName(fmt.Sprintf("%s%d", prefix, i))
		u.SetLabels(map[string]string{"pre": "l"})
		u.SetAnnotations(map[string]string{"pre": "a"})
		out = append(out, u)
	}
	return out
}

// describeTargets names the targets of fc's controller with their types
// and, in brackets, those whose kind has the status subresource.
func describeTargets(fc *fuzzCase) string {
	var out []string
	for _, t := range fc.op.Spec.Controllers[0].AllTargets() {
		s := string(t.Type)
		if t.Name != "" {
			s = t.Name + ":" + s
		}
		s = t.Kind + "/" + s
		if fc.status[t.Kind] {
			s += "[status]"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// fuzzTail returns the steps of a seed: 120 small bytes from a generator
// seeded with seed, with a resync at byte 40 and a restart that makes two
// changes while stopped at byte 80.
func fuzzTail(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 25))
	b := make([]byte, 120)
	for i := range b {
		b[i] = byte(r.IntN(16))
	}
	b[40], b[80] = fuzzResync, fuzzRestart+2
	return b
}
