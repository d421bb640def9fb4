package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is dctl's release version: the chart's appVersion and the tag of
// the image that `make image` builds are the same (test/image checks it). A
// build may override it with -ldflags "-X main.version=...".
var version = "0.1.0"

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the dctl version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := version
			if v == "" {
				v = "devel"
				if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
					v = bi.Main.Version
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dctl %s\n", v)
			return nil
		},
	}
}
