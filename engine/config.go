// Package engine wires Babelagent together for the CLI and the server: the
// registry of agent kinds, the kernel with its secrets, policy, approvals
// and audit log, the runner, and the store.
//
// Configuration comes only from an explicit file (--config) or the
// operator's and user's own directories (XDG); nothing is read because it
// lies in the working directory: no .env, config, database or topology.
package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/kernel"
	"github.com/babelagent/babel/run"
)

// Config is the operator's configuration.
type Config struct {
	// DataDir holds the store and the audit log (default
	// $XDG_DATA_HOME/babel, else ~/.local/share/babel).
	DataDir string `json:"data_dir,omitempty"`
	// AuditKey is the audit signing key, outside DataDir (default
	// $XDG_CONFIG_HOME/babel/audit.key, else ~/.config/babel/audit.key).
	AuditKey string `json:"audit_key,omitempty"`
	// SecretsFile is an optional 0600 KEY=VALUE or JSON file of secrets.
	SecretsFile string `json:"secrets_file,omitempty"`
	// PolicyFile is an optional authorization policy (YAML); without it
	// the local user may do anything and nobody else anything.
	PolicyFile string `json:"policy_file,omitempty"`
	// Limits are the defaults for every run; each must be within the
	// compiled-in ceilings or Open fails.
	Limits LimitsConfig `json:"limits,omitempty"`
	// Prices replaces the model price table cost budgets use (US dollars per
	// million tokens; "*" prices unlisted models).
	Prices kernel.Prices `json:"prices,omitempty"`
	// ApprovalTimeout denies approvals not decided in time (default 1h).
	ApprovalTimeout graph.Duration `json:"approval_timeout,omitempty"`
	// UnsafeDisableRuleOfTwo and UnsafeDisableAudit turn a control off.
	// Each is logged loudly and recorded in the audit log.
	UnsafeDisableRuleOfTwo bool `json:"unsafe_disable_rule_of_two,omitempty"`
	UnsafeDisableAudit     bool `json:"unsafe_disable_audit,omitempty"`
	// OTLPEndpoint exports content-free spans when set.
	OTLPEndpoint string `json:"otlp_endpoint,omitempty"`
	// Serve is the server's own section, read by `babel serve` (package serve).
	Serve json.RawMessage `json:"serve,omitempty"`
}

// LimitsConfig lowers the run limits.
type LimitsConfig struct {
	Deadline   graph.Duration `json:"deadline,omitempty"`
	MaxSteps   int            `json:"max_steps,omitempty"`
	MaxTokens  int            `json:"max_tokens,omitempty"`
	MaxCostUSD float64        `json:"max_cost_usd,omitempty"`
	// MaxEgressBytes caps what one run exchanges with the outside.
	MaxEgressBytes int64 `json:"max_egress_bytes,omitempty"`
	Concurrency    int   `json:"concurrency,omitempty"`
}

// Defaults returns the zero-config configuration for an environment
// (os.Environ() taken once by main): only HOME and XDG_* are read.
func Defaults(environ []string) Config {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	home := env["HOME"]
	data := env["XDG_DATA_HOME"]
	if data == "" && home != "" {
		data = filepath.Join(home, ".local", "share")
	}
	conf := env["XDG_CONFIG_HOME"]
	if conf == "" && home != "" {
		conf = filepath.Join(home, ".config")
	}
	c := Config{}
	if data != "" {
		c.DataDir = filepath.Join(data, "babel")
	}
	if conf != "" {
		c.AuditKey = filepath.Join(conf, "babel", "audit.key")
	}
	return c
}

// LoadConfig reads an explicit configuration file over the defaults.
// Unknown keys are errors.
func LoadConfig(path string, environ []string) (Config, error) {
	c := Defaults(environ)
	if path == "" {
		return c, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	if err := yaml.UnmarshalWithOptions(b, &c, yaml.Strict(), yaml.DisallowUnknownField(), yaml.UseJSONUnmarshaler()); err != nil {
		return c, fmt.Errorf("config %s: %s", path, yaml.FormatError(err, false, true))
	}
	return c, nil
}

// validate checks the configuration against the compiled-in ceilings.
func (c *Config) validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("no data directory: set HOME, XDG_DATA_HOME or data_dir"))
	} else if !filepath.IsAbs(c.DataDir) {
		errs = append(errs, fmt.Errorf("data_dir %q must be absolute", c.DataDir))
	}
	if !c.UnsafeDisableAudit {
		switch {
		case c.AuditKey == "":
			errs = append(errs, errors.New("no audit key path: set HOME, XDG_CONFIG_HOME or audit_key"))
		case !filepath.IsAbs(c.AuditKey):
			errs = append(errs, fmt.Errorf("audit_key %q must be absolute", c.AuditKey))
		case within(c.AuditKey, c.DataDir):
			errs = append(errs, fmt.Errorf("audit_key %q must live outside the data directory %q", c.AuditKey, c.DataDir))
		}
	}
	l := c.Limits
	if d := l.Deadline.D(); d < 0 || d > run.Ceilings.Deadline {
		errs = append(errs, fmt.Errorf("limits.deadline %v is above the ceiling of %v", d, run.Ceilings.Deadline))
	}
	if l.MaxSteps < 0 || l.MaxSteps > run.Ceilings.MaxSteps {
		errs = append(errs, fmt.Errorf("limits.max_steps %d is above the ceiling of %d", l.MaxSteps, run.Ceilings.MaxSteps))
	}
	if l.MaxTokens < 0 || l.MaxTokens > run.Ceilings.MaxTokens {
		errs = append(errs, fmt.Errorf("limits.max_tokens %d is above the ceiling of %d", l.MaxTokens, run.Ceilings.MaxTokens))
	}
	if l.MaxEgressBytes < 0 || l.MaxEgressBytes > run.Ceilings.MaxEgressBytes {
		errs = append(errs, fmt.Errorf("limits.max_egress_bytes %d is above the ceiling of %d", l.MaxEgressBytes, run.Ceilings.MaxEgressBytes))
	}
	if l.MaxCostUSD < 0 || l.MaxCostUSD > run.Ceilings.MaxCostUSD {
		errs = append(errs, fmt.Errorf("limits.max_cost_usd %g is above the ceiling of %g", l.MaxCostUSD, run.Ceilings.MaxCostUSD))
	}
	for m, p := range c.Prices {
		if p.InputPerMTok < 0 || p.OutputPerMTok < 0 {
			errs = append(errs, fmt.Errorf("prices.%s: a price cannot be negative", m))
		}
	}
	if l.Concurrency < 0 || l.Concurrency > 4096 {
		errs = append(errs, fmt.Errorf("limits.concurrency %d is above the ceiling of 4096", l.Concurrency))
	}
	if t := c.ApprovalTimeout.D(); t < 0 || t > 7*24*time.Hour {
		errs = append(errs, fmt.Errorf("approval_timeout %v is above the ceiling of 168h", t))
	}
	return errors.Join(errs...)
}

func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
