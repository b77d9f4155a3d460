// Command loadtest measures `babel serve` on loopback: runs per second and
// latency percentiles for a three-node builtin graph (trim -> upper ->
// echo) started through REST with a bearer token, over keep-alive
// connections. It is bounded in requests and time.
//
// By default it starts the server in-process (same binary, same machine),
// with the rate limit raised so that one principal can load it; -url
// points it at a server already running instead.
//
//	go run ./serve/loadtest                      # 50,000 runs or 20 s, 64 connections
//	go run ./serve/loadtest -n 200000 -d 30s -c 128
//	go run ./serve/loadtest -url http://127.0.0.1:7077 -token-file tokens -graph pipeline
//
// It never binds anything but 127.0.0.1.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/babelagent/babel/catalog"
	"github.com/babelagent/babel/graph"
	"github.com/babelagent/babel/serve"
)

const pipeline = `
name: pipeline
description: Trim, upper-case and echo the text.
nodes:
  - {name: trim, agent: "builtin:trim"}
  - {name: upper, agent: "builtin:upper"}
  - {name: echo, agent: "builtin:echo"}
`

// Options is one load run.
type Options struct {
	Requests    int
	Duration    time.Duration
	Connections int
	URL         string // empty: start a server in-process
	Token       string
	Graph       string
}

// Report is what a load run measured.
type Report struct {
	Runs        int64         `json:"runs"`
	Errors      int64         `json:"errors"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	RunsPerSec  float64       `json:"runs_per_sec"`
	P50         time.Duration `json:"p50_ns"`
	P90         time.Duration `json:"p90_ns"`
	P99         time.Duration `json:"p99_ns"`
	Max         time.Duration `json:"max_ns"`
	Connections int           `json:"connections"`
	// CPUPerRun is the process's CPU time (user+system; client and
	// in-process server together) per run: the measure that does not
	// depend on what else the machine is doing.
	CPUPerRun time.Duration `json:"cpu_per_run_ns"`
	// RunsPerCPUSecond is 1/CPUPerRun; times the cores, what an otherwise
	// idle machine can sustain.
	RunsPerCPUSecond float64 `json:"runs_per_cpu_second"`
	GOMAXPROCS       int     `json:"gomaxprocs"`
	FirstError       string  `json:"first_error,omitempty"`
}

func (r *Report) String() string {
	return fmt.Sprintf("%d runs in %v over %d connections (GOMAXPROCS=%d): %.0f runs/s; latency p50 %v, p90 %v, p99 %v, max %v; %d errors\n"+
		"CPU %v per run (client and server together): %.0f runs per CPU-second",
		r.Runs, r.Elapsed.Round(time.Millisecond), r.Connections, r.GOMAXPROCS, r.RunsPerSec,
		r.P50.Round(time.Microsecond), r.P90.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.Max.Round(time.Microsecond), r.Errors,
		r.CPUPerRun.Round(100*time.Nanosecond), r.RunsPerCPUSecond)
}

func main() {
	var o Options
	var tokenFile string
	var asJSON bool
	flag.IntVar(&o.Requests, "n", 50_000, "stop after this many runs")
	flag.DurationVar(&o.Duration, "d", 20*time.Second, "stop after this long")
	flag.IntVar(&o.Connections, "c", 64, "concurrent keep-alive connections")
	flag.StringVar(&o.URL, "url", "", "a running server (loopback); empty starts one in-process")
	flag.StringVar(&tokenFile, "token-file", "", "with -url: a file holding the bearer token")
	flag.StringVar(&o.Token, "token", "", "with -url: the bearer token")
	serveOnly := flag.Bool("serve", false, "only serve the pipeline graph on 127.0.0.1 (print URL and token), until interrupted; then print the server's CPU time")
	flag.StringVar(&o.Graph, "graph", "pipeline", "with -url: the graph to run")
	flag.BoolVar(&asJSON, "json", false, "print the report as JSON")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile (client and in-process server) to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile to this file")
	flag.Parse()
	if *memProfile != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			f, err := os.Create(*memProfile)
			if err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(2)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if *serveOnly {
		if err := serveAlone(); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(1)
		}
		return
	}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(2)
		}
		f := strings.Fields(string(b))
		o.Token = f[len(f)-1]
	}
	rep, err := Run(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		return
	}
	if asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(rep)
		return
	}
	fmt.Println(rep)
}

// Run makes one load run.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Requests <= 0 || o.Duration <= 0 || o.Connections <= 0 {
		return nil, errors.New("-n, -d and -c must be positive")
	}
	if o.Graph == "" {
		o.Graph = "pipeline"
	}
	if o.URL == "" {
		url, token, stop, err := startServer(ctx, o.Connections)
		if err != nil {
			return nil, err
		}
		defer stop()
		o.URL, o.Token = url, token
	} else if err := checkLoopback(o.URL); err != nil {
		return nil, err
	}
	return load(ctx, o)
}

func checkLoopback(raw string) error {
	var host string
	if i := strings.Index(raw, "://"); i >= 0 {
		host = raw[i+3:]
	}
	host, _, _ = strings.Cut(host, "/")
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	if ip := net.ParseIP(strings.Trim(h, "[]")); (ip == nil || !ip.IsLoopback()) && h != "localhost" {
		return fmt.Errorf("-url %s: loopback only", raw)
	}
	return nil
}

// serveAlone serves until SIGINT or SIGTERM, so a client in another process
// measures the server alone.
func serveAlone() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	url, token, shutdown, err := startServer(ctx, 256)
	if err != nil {
		return err
	}
	fmt.Println(url, token)
	cpu0 := cpuTime()
	<-ctx.Done()
	fmt.Printf("server CPU: %v\n", cpuTime()-cpu0)
	shutdown()
	return nil
}

// startServer serves the pipeline graph on 127.0.0.1 with one token, and
// the per-principal rate limit raised (the load comes from one principal).
func startServer(ctx context.Context, conns int) (url, token string, stop func(), err error) {
	spec, err := graph.Parse([]byte(pipeline))
	if err != nil {
		return "", "", nil, err
	}
	g, err := graph.Compile(spec, catalog.Registry(nil), nil)
	if err != nil {
		return "", "", nil, err
	}
	token = "loadtest-token-0123456789abcdef"
	tok, err := serve.NewTokens(map[string]string{"loadtest": token})
	if err != nil {
		return "", "", nil, err
	}
	cfg := &serve.Config{Listen: "127.0.0.1:0", RatePerPrincipal: 1e7, Burst: 1e6, MaxConcurrentRuns: max(256, 2*conns)}
	srv, err := serve.New([]*graph.Graph{g}, cfg, &serve.Options{Tokens: tok})
	if err != nil {
		return "", "", nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	ln, err := srv.Listen(sctx)
	if err != nil {
		cancel()
		return "", "", nil, err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	return "http://" + ln.Addr().String(), token, func() { cancel(); <-done }, nil
}

func load(ctx context.Context, o Options) (*Report, error) {
	tr := &http.Transport{MaxIdleConns: o.Connections, MaxIdleConnsPerHost: o.Connections, MaxConnsPerHost: o.Connections,
		IdleConnTimeout: time.Minute, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	endpoint := o.URL + "/v1/graphs/" + o.Graph + "/runs"
	body := []byte(`{"input":"  hello, load  ","wait":true}`)
	auth := "Bearer " + o.Token

	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var issued, errs atomic.Int64
	var firstErr atomic.Value
	lat := make([][]time.Duration, o.Connections)
	var wg sync.WaitGroup
	cpu0 := cpuTime()
	start := time.Now()
	for w := range o.Connections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, o.Requests/o.Connections+1)
			// Keep what was measured even when the time limit cuts a
			// request off.
			defer func() { lat[w] = mine }()
			buf := make([]byte, 0, 2048)
			for ctx.Err() == nil && issued.Add(1) <= int64(o.Requests) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
				req.Header.Set("Authorization", auth)
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					bb := bytes.NewBuffer(buf[:0])
					_, err = io.Copy(bb, resp.Body)
					resp.Body.Close()
					if err == nil && (resp.StatusCode != http.StatusOK || !bytes.Contains(bb.Bytes(), []byte(`"status":"succeeded"`))) {
						err = fmt.Errorf("status %d: %.200s", resp.StatusCode, bb.Bytes())
					}
				}
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				mine = append(mine, time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	rep := &Report{Runs: int64(len(all)), Errors: errs.Load(), Elapsed: elapsed, Connections: o.Connections, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if fe, ok := firstErr.Load().(string); ok {
		rep.FirstError = fe
	}
	if len(all) == 0 {
		return rep, fmt.Errorf("no run succeeded: %s", rep.FirstError)
	}
	rep.RunsPerSec = float64(len(all)) / elapsed.Seconds()
	if cpu > 0 {
		rep.CPUPerRun = cpu / time.Duration(len(all))
		rep.RunsPerCPUSecond = float64(len(all)) / cpu.Seconds()
	}
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	rep.P50, rep.P90, rep.P99, rep.Max = pct(0.50), pct(0.90), pct(0.99), all[len(all)-1]
	return rep, nil
}
