package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

func newStatusCommand() *cobra.Command {
	var kubeconfig, colour string
	cmd := &cobra.Command{
		Use:   "status [OPERATOR ...]",
		Short: "Print the status of operators and their controllers",
		Long: `status reads the Operator objects of the cluster and prints one line per
controller: its operator, whether it is Ready (with the reason), its counters
(source changes processed, target writes, failed writes) and its last error.
Colour is used when the output is a terminal (--color=auto).`,
		Example: `  dctl status
  dctl status pod-container-num-annotator --color=never`,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := &managerFlags{kubeconfig: kubeconfig}
			cfg, err := f.restConfig()
			if err != nil {
				return err
			}
			scheme, err := operator.NewScheme()
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme})
			if err != nil {
				return err
			}
			list := &opv1a1.OperatorList{}
			if err := c.List(contextOf(cmd), list); err != nil {
				return fmt.Errorf("listing operators: %w", err)
			}
			ops, err := selectOperators(list.Items, args)
			if err != nil {
				return err
			}
			useColour := colour == "always"
			if colour == "auto" {
				if fh, ok := cmd.OutOrStdout().(*os.File); ok && term.IsTerminal(int(fh.Fd())) {
					useColour = true
				}
			} else if colour != "always" && colour != "never" {
				return fmt.Errorf("--color: want auto, always or never, got %q", colour)
			}
			return printStatus(cmd.OutOrStdout(), ops, useColour)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&colour, "color", "auto", "colour the READY column: auto, always or never")
	return cmd
}

// selectOperators returns the operators of items whose names are in names, or
// all of items when names is empty. A name that matches no operator is an
// error listing every such name, sorted.
func selectOperators(items []opv1a1.Operator, names []string) ([]opv1a1.Operator, error) {
	if len(names) == 0 {
		return items, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	found := map[string]bool{}
	var ops []opv1a1.Operator
	for _, op := range items {
		if want[op.Name] {
			ops = append(ops, op)
			found[op.Name] = true
		}
	}
	var missing []string
	for n := range want {
		if !found[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("operator(s) not found: %s", strings.Join(missing, ", "))
	}
	return ops, nil
}

// printStatus writes the table of operators and controllers.
func printStatus(w io.Writer, ops []opv1a1.Operator, colour bool) error {
	sort.Slice(ops, func(i, j int) bool { return ops[i].Name < ops[j].Name })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATOR\tCONTROLLER\tREADY\tREASON\tDELTAS\tWRITES\tWRITE-ERRORS\tLAST ERROR")
	paint := func(s, code string) string {
		if !colour {
			return s
		}
		return "\x1b[" + code + "m" + s + "\x1b[0m"
	}
	for _, op := range ops {
		if len(op.Status.Controllers) == 0 {
			fmt.Fprintf(tw, "%s\t-\t%s\t-\t-\t-\t-\t-\n", op.Name, paint("Unknown", "33"))
			continue
		}
		for _, cs := range op.Status.Controllers {
			ready, reason := "Unknown", "-"
			if c := meta.FindStatusCondition(cs.Conditions, "Ready"); c != nil {
				ready, reason = string(c.Status), c.Reason
			}
			switch ready {
			case "True":
				ready = paint(ready, "32")
			case "False":
				ready = paint(ready, "31")
			default:
				ready = paint(ready, "33")
			}
			last := "-"
			if n := len(cs.LastErrors); n > 0 {
				last = cs.LastErrors[n-1].Message
				if len(last) > 100 {
					last = last[:97] + "..."
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", op.Name, cs.Name, ready, reason,
				cs.Counters.Deltas, cs.Counters.Writes, cs.Counters.WriteErrors, last)
		}
	}
	return tw.Flush()
}
