package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/babelagent/babel/audit"
	"github.com/babelagent/babel/engine"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/store"
)

func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// withEngine runs f with an open engine.
func (e *env) withEngine(cmd *cobra.Command, f func(ctx context.Context, eng *engine.Engine) error) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	eng, err := e.open(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	return f(ctx, eng)
}

func (e *env) approvalsCmd() *cobra.Command {
	c := &cobra.Command{Use: "approvals", Short: "List, show and decide the calls that wait for a human"}
	var all bool
	list := &cobra.Command{
		Use: "list", Short: "List pending approvals (--all for every status)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.withEngine(cmd, func(ctx context.Context, eng *engine.Engine) error {
				status := kernel.StatusPending
				if all {
					status = ""
				}
				as, err := eng.Store.Approvals(ctx, status)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSTATUS\tRUN\tNODE\tADAPTER\tDESTINATION\tREASON")
				for _, a := range as {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\n", a.ID, a.Status, a.RunID, a.Node, a.Adapter, a.Destination, a.Reason)
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().BoolVar(&all, "all", false, "every status, not only pending")
	show := &cobra.Command{
		Use: "show ID", Short: "Show the exact call: node, adapter, destination, canonical arguments and digest", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(cmd, func(ctx context.Context, eng *engine.Engine) error {
				a, err := eng.Store.Approval(ctx, args[0])
				if err != nil {
					return notFound(err)
				}
				return e.printJSON(a)
			})
		},
	}
	c.AddCommand(list, show, e.decideCmd("approve"), e.decideCmd("deny"), e.decideCmd("terminate"))
	return c
}

func notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, kernel.ErrNoSuchApproval) {
		return badInput(err)
	}
	return err
}

func (e *env) decideCmd(decision string) *cobra.Command {
	var digest string
	var noResume bool
	c := &cobra.Command{
		Use:   decision + " ID --digest DIGEST",
		Short: decision + " a waiting call; --digest is the digest `approvals show` printed, so the decision binds that exact call",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(cmd, func(ctx context.Context, eng *engine.Engine) error {
				a, err := eng.Store.Approval(ctx, args[0])
				if err != nil {
					return notFound(err)
				}
				if digest == "" {
					b, _ := json.MarshalIndent(a, "", "  ")
					fmt.Fprintf(e.stderr, "%s\n", b)
					return badInput(fmt.Errorf("pass --digest %s to %s exactly this call", a.Digest, decision))
				}
				a, err = eng.Decide(ctx, args[0], decision, digest, e.principal())
				if err != nil {
					if errors.Is(err, kernel.ErrStale) || errors.Is(err, kernel.ErrNotPending) || errors.Is(err, engine.ErrSelfApproval) {
						return &exitError{code: exitDenied, err: err}
					}
					return err
				}
				fmt.Fprintf(e.stderr, "approval %s: %s by %s\n", a.ID, a.Status, a.Approver)
				if noResume {
					return nil
				}
				res, err := eng.Resume(ctx, a.RunID, nil, e.progress(false))
				if err != nil {
					fmt.Fprintf(e.stderr, "run %s not resumed: %v (resume it with: babel runs resume %s)\n", a.RunID, err, a.RunID)
					return nil
				}
				return e.report(eng, res, false)
			})
		},
	}
	c.Flags().StringVar(&digest, "digest", "", "the digest of the call you were shown")
	c.Flags().BoolVar(&noResume, "no-resume", false, "record the decision without resuming the run")
	return c
}

func (e *env) runsCmd() *cobra.Command {
	c := &cobra.Command{Use: "runs", Short: "List, show, resume, cancel and replay runs"}
	c.AddCommand(&cobra.Command{
		Use: "list", Short: "List your runs, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.withEngine(cmd, func(ctx context.Context, eng *engine.Engine) error {
				rs, err := eng.Store.Runs(ctx, e.principal(), 50)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "RUN\tGRAPH\tSTATUS\tSTARTED\tSTEPS")
				for _, r := range rs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", r.RunID, r.Graph, r.Status, r.StartedAt.Format(time.RFC3339), r.Steps)
				}
				return tw.Flush()
			})
		},
	}, &cobra.Command{
		Use: "show RUN", Short: "Show a run as JSON", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(cmd, func(ctx context.Context, eng *engine.Engine) error {
				rec, err := eng.Store.Run(ctx, args[0])
				if err != nil || rec.Result.Principal != e.principal() {
					return badInput(fmt.Errorf("run %s: %w", args[0], store.ErrNotFound))
				}
				return e.printJSON(rec.Result)
			})
		},
	}, &cobra.Command{
		Use: "resume RUN", Short: "Resume a run that waited for approval", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.runGraph(cmd.Context(), &engine.Start{RunID: args[0]}, false)
		},
	}, &cobra.Command{
		Use: "cancel RUN", Short: "Cancel a run and void its pending approvals", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(cmd, func(ctx context.Context, eng *engine.Engine) error {
				if !eng.Cancel(ctx, args[0]) {
					return badInput(fmt.Errorf("run %s is not running here and has no pending approval", args[0]))
				}
				fmt.Fprintf(e.stderr, "run %s cancelled\n", args[0])
				return nil
			})
		},
	}, &cobra.Command{
		Use: "replay RUN", Short: "Reconstruct a run's ordered trajectory from the audit log", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withEngine(cmd, func(ctx context.Context, eng *engine.Engine) error {
				recs, err := audit.Replay(ctx, eng.AuditPath(), args[0])
				if err != nil {
					return err
				}
				if len(recs) == 0 {
					return badInput(fmt.Errorf("no audit records for run %s", args[0]))
				}
				enc := json.NewEncoder(e.stdout)
				for i := range recs {
					if err := enc.Encode(&recs[i]); err != nil {
						return err
					}
				}
				return nil
			})
		},
	})
	return c
}

func (e *env) auditCmd() *cobra.Command {
	c := &cobra.Command{Use: "audit", Short: "Verify and export the tamper-evident audit log"}
	var pubPath string
	verify := &cobra.Command{
		Use: "verify", Short: "Check every record, hash and signature; exit 1 naming the first bad sequence number", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := engine.LoadConfig(e.configPath, e.environ)
			if err != nil {
				return badInput(err)
			}
			if pubPath == "" {
				pubPath = audit.PublicKeyFile(cfg.AuditKey)
			}
			pub, err := audit.LoadPublicKey(pubPath)
			if err != nil {
				return badInput(err)
			}
			path := filepath.Join(cfg.DataDir, "audit", "audit.db")
			if _, err := os.Stat(path); err != nil {
				return badInput(fmt.Errorf("no audit log at %s", path))
			}
			rep, err := audit.Verify(cmd.Context(), path, pub)
			var te *audit.TamperError
			if errors.As(err, &te) {
				return &exitError{code: exitFailed, err: fmt.Errorf("audit log tampered: first bad record is seq %d: %s (%s)", te.Seq, te.Problem, te.Detail)}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "ok: %d records, %d signatures, head seq %d hash %s\n", rep.Records, rep.Signatures, rep.HeadSeq, rep.HeadHash)
			return nil
		},
	}
	verify.Flags().StringVar(&pubPath, "public-key", "", "the writer's public key (default: beside the audit key)")
	export := &cobra.Command{
		Use: "export", Short: "Write the log as JSON Lines to stdout", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := engine.LoadConfig(e.configPath, e.environ)
			if err != nil {
				return badInput(err)
			}
			return audit.Export(cmd.Context(), filepath.Join(cfg.DataDir, "audit", "audit.db"), e.stdout)
		},
	}
	c.AddCommand(verify, export)
	return c
}

func (e *env) killCmd() *cobra.Command {
	var all, release bool
	c := &cobra.Command{
		Use: "kill --all | --release", Short: "Engage the global kill switch: stop every run, void approvals, refuse new runs", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if all == release {
				return badInput(errors.New("give --all to engage the kill switch, or --release to lift it"))
			}
			return e.withEngine(cmd, func(ctx context.Context, eng *engine.Engine) error {
				if err := eng.Kill(ctx, e.principal(), all); err != nil {
					return &exitError{code: exitDenied, err: err}
				}
				if all {
					fmt.Fprintln(e.stderr, "kill switch engaged: runs stopped, approvals voided, new runs refused")
				} else {
					fmt.Fprintln(e.stderr, "kill switch released")
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&all, "all", false, "halt everything")
	c.Flags().BoolVar(&release, "release", false, "lift the kill switch")
	return c
}
