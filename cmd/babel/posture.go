package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/babelagent/babel/engine"
	"github.com/babelagent/babel/posture"
)

func (e *env) postureCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use: "posture", Short: "The defense-in-depth scorecard of this configuration (C1–C10)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.withEngine(cmd, func(ctx context.Context, eng *engine.Engine) error {
				rep := posture.Assess(ctx, eng)
				if asJSON {
					return e.printJSON(rep)
				}
				for _, c := range rep.Criteria {
					mark := "ok "
					if !c.On() {
						mark = "!! "
					}
					fmt.Fprintf(e.stdout, "%s%s %s\n", mark, c.ID, c.Title)
					for _, k := range c.Controls {
						m := "+"
						if !k.On {
							m = "-"
						}
						fmt.Fprintf(e.stdout, "     %s %s: %s\n", m, k.Name, k.Evidence)
					}
					for _, g := range c.Gaps {
						fmt.Fprintf(e.stdout, "     ? gap: %s\n", g)
					}
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}
