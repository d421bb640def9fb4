package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/sharding"
)

func newStatusCommand() *cobra.Command {
	var kubeconfig, colour string
	cmd := &cobra.Command{
		Use:   "status [OPERATOR ...]",
		Short: "Print the status of operators and their controllers",
		Long: `status reads the Operator objects of the cluster and prints one line per
controller: its operator, whether it is Ready (with the reason), its counters
(source changes processed, target writes, failed writes) and its last error.

When managers run as a ring (dctl start --sharding), that is when Leases
labelled sharding.dcontroller.io/ring exist in any namespace, the operator
lines gain a MEMBER column: the member holding the bucket of the operator's
name ("by namespace" for spec.sharding Namespace, "-" while the bucket is
free). Then, for each ring (namespace/ring), a table of its members: whether
the member's Lease is live (renewed within its duration, by this machine's
clock), the buckets it holds (count and ranges of the 64), the operators,
hook syncs and watch events it published on its Lease, and its address;
and a line with the buckets no member holds, if any. Without the right to
list Leases the ring tables are left out.

Colour is used when the output is a terminal (--color=auto).`,
		Example: `  dctl status
  dctl status pod-container-num-annotator --color=never

  # a ring of two members, one of them gone:
  # OPERATOR     CONTROLLER  READY  REASON  DELTAS  WRITES  WRITE-ERRORS  MEMBER  LAST ERROR
  # app-summary  summary     True   Ready   42      7       0             a       -
  #
  # RING                            MEMBER  LIVE                  BUCKETS     OPERATORS  SYNCS  WATCH EVENTS  ADDRESS
  # dcontroller-system/dcontroller  a       yes                   40 (0-39)   3          0      1250          10.0.0.7:8443
  # dcontroller-system/dcontroller  b       no (expired 12s ago)  21 (40-60)  2          0      610           10.0.0.8:8443
  # unassigned: 3 (61-63)`,
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
			var rings []ringStatus
			leases := &coordinationv1.LeaseList{}
			if err := c.List(contextOf(cmd), leases, client.HasLabels{sharding.LabelRing}); err == nil {
				rings = ringsFromLeases(leases.Items)
			} else if !apierrors.IsForbidden(err) {
				return fmt.Errorf("listing the Leases of rings: %w", err)
			}
			useColour := colour == "always"
			if colour == "auto" {
				if fh, ok := cmd.OutOrStdout().(*os.File); ok && term.IsTerminal(int(fh.Fd())) {
					useColour = true
				}
			} else if colour != "always" && colour != "never" {
				return fmt.Errorf("--color: want auto, always or never, got %q", colour)
			}
			return printStatus(cmd.OutOrStdout(), ops, rings, time.Now(), useColour)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&colour, "color", "auto", "colour the READY and LIVE columns: auto, always or never")
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

// printStatus writes the table of operators and controllers and, when
// rings is not empty, a MEMBER column in it (operatorMember) and the
// members of each ring at now (printRings). colour wraps the READY and
// LIVE cells in ANSI colours.
func printStatus(w io.Writer, ops []opv1a1.Operator, rings []ringStatus, now time.Time, colour bool) error {
	sort.Slice(ops, func(i, j int) bool { return ops[i].Name < ops[j].Name })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	memberCol := func(op *opv1a1.Operator) string { return "" }
	if len(rings) > 0 {
		memberCol = func(op *opv1a1.Operator) string { return operatorMember(op, rings) + "\t" }
	}
	header := "OPERATOR\tCONTROLLER\tREADY\tREASON\tDELTAS\tWRITES\tWRITE-ERRORS\t"
	if len(rings) > 0 {
		header += "MEMBER\t"
	}
	fmt.Fprintln(tw, header+"LAST ERROR")
	paint := func(s, code string) string {
		if !colour {
			return s
		}
		return "\x1b[" + code + "m" + s + "\x1b[0m"
	}
	for i := range ops {
		op := &ops[i]
		if len(op.Status.Controllers) == 0 {
			fmt.Fprintf(tw, "%s\t-\t%s\t-\t-\t-\t-\t%s-\n", op.Name, paint("Unknown", "33"), memberCol(op))
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
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s%s\n", op.Name, cs.Name, ready, reason,
				cs.Counters.Deltas, cs.Counters.Writes, cs.Counters.WriteErrors, memberCol(op), last)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printRings(w, rings, now, paint)
}
