package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/babelagent/babel/catalog"
)

func (e *env) doctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Say which adapters, sandboxes and stores are usable here, and why not",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(e.stdout, "babel doctor (%s/%s, %s)\n", runtime.GOOS, runtime.GOARCH, runtime.Version())
			for _, c := range catalog.Doctor(cmd.Context()) {
				mark := "ok  "
				if !c.OK {
					mark = "no  "
				}
				fmt.Fprintf(e.stdout, "  %s %-12s %-10s %s\n", mark, c.Family, c.Name, c.Detail)
			}
			return nil
		},
	}
}
