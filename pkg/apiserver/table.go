package apiserver

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// tableColumns are the columns of `kubectl get`: NAME and AGE, and with
// `-o wide` (priority 1) GENERATION, RESOURCE-VERSION and LABELS. Views are
// schemaless, so only metadata is shown; `-o yaml|json` shows everything.
var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Age", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	{Name: "Generation", Type: "integer", Priority: 1, Description: metav1.ObjectMeta{}.SwaggerDoc()["generation"]},
	{Name: "Resource-Version", Type: "string", Priority: 1, Description: metav1.ObjectMeta{}.SwaggerDoc()["resourceVersion"]},
	{Name: "Labels", Type: "string", Priority: 1, Description: metav1.ObjectMeta{}.SwaggerDoc()["labels"]},
}

// ConvertToTable renders an object or a list as a metav1.Table (the form
// kubectl asks for when it prints). Each row carries its object so that
// includeObject works.
func (s *storage) ConvertToTable(_ context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: tableColumns}
	if opts, ok := tableOptions.(*metav1.TableOptions); ok && opts != nil && opts.NoHeaders {
		table.ColumnDefinitions = nil
	}
	switch t := obj.(type) {
	case *unstructured.Unstructured:
		table.ResourceVersion = t.GetResourceVersion()
		table.Rows = []metav1.TableRow{row(t)}
	case *unstructured.UnstructuredList:
		table.ResourceVersion = t.GetResourceVersion()
		table.Continue = t.GetContinue()
		table.RemainingItemCount = t.GetRemainingItemCount()
		table.Rows = make([]metav1.TableRow, 0, len(t.Items))
		for i := range t.Items {
			table.Rows = append(table.Rows, row(&t.Items[i]))
		}
	default:
		return nil, fmt.Errorf("cannot render %T as a table", obj)
	}
	return table, nil
}

func row(u *unstructured.Unstructured) metav1.TableRow {
	age := "<unknown>"
	if ts := u.GetCreationTimestamp(); !ts.IsZero() {
		age = duration.HumanDuration(time.Since(ts.Time))
	}
	return metav1.TableRow{
		Cells:  []any{u.GetName(), age, u.GetGeneration(), u.GetResourceVersion(), labelString(u.GetLabels())},
		Object: runtime.RawExtension{Object: u},
	}
}

func labelString(l map[string]string) string {
	if len(l) == 0 {
		return "<none>"
	}
	parts := make([]string, 0, len(l))
	for k, v := range l {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
