package run

import (
	"sync"
	"time"
)

// workers is the process's pool of parked goroutines that run nodes. Handing
// a run to a parked worker costs a channel send; starting a goroutine
// costs more than a no-op node itself, mostly in growing the new stack to
// the depth a kernel call needs. A worker that finds no more work parks;
// one parked for longer than workerIdle exits, so an idle process keeps no
// goroutines.
var workers = &workerPool{}

const (
	// maxIdleWorkers bounds the parked workers; past it a worker exits.
	maxIdleWorkers = 512
	// workerIdle is how long a worker stays parked before it exits.
	workerIdle = 50 * time.Millisecond
)

type workerPool struct {
	mu      sync.Mutex
	idle    []*worker // a stack: the most recently parked on top
	janitor bool      // a janitor goroutine is running
}

type worker struct {
	runs   chan *exec // runs to help; nil tells the worker to exit
	parked int64      // mono
}

// run has a parked worker, or a new one, help e.
func (p *workerPool) run(e *exec) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.runs <- e // buffered: never blocks
		return
	}
	p.mu.Unlock()
	go p.work(&worker{runs: make(chan *exec, 1)}, e)
}

// work helps runs until it is told to exit or the pool is full. It first
// grows its stack while it holds two frames: left to grow on demand, it
// overflows deep inside runNode -> kernel.Invoke -> the agent, where copying
// it means walking every frame. A parked worker keeps the grown stack.
func (p *workerPool) work(w *worker, e *exec) {
	growStack(0)
	for {
		wake := e.help()
		p.mu.Lock()
		full := len(p.idle) >= maxIdleWorkers
		if !full {
			w.parked = mono()
			p.idle = append(p.idle, w)
			if !p.janitor {
				p.janitor = true
				go p.retire()
			}
		}
		p.mu.Unlock()
		if wake != nil {
			// The run's caller waits for this: woken last, it finds the
			// processor free as soon as this worker parks.
			wakeUp(wake)
		}
		e = nil // hold nothing of the run while parked
		if full {
			return
		}
		if e = <-w.runs; e == nil {
			return
		}
	}
}

// retire tells workers parked longer than workerIdle to exit, and exits
// itself when none is parked.
func (p *workerPool) retire() {
	for {
		time.Sleep(workerIdle / 2)
		p.mu.Lock()
		cut := mono() - int64(workerIdle)
		n := 0 // the oldest are at the bottom of the stack
		for n < len(p.idle) && p.idle[n].parked < cut {
			p.idle[n].runs <- nil
			n++
		}
		rest := copy(p.idle, p.idle[n:])
		clear(p.idle[rest:])
		p.idle = p.idle[:rest]
		if len(p.idle) == 0 {
			p.janitor = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// growStack needs a frame of growStackBytes, which makes the runtime give
// the goroutine an 8 KiB stack up front.
//
//go:noinline
func growStack(i int) byte {
	var buf [growStackBytes]byte
	return buf[i%len(buf)]
}

const growStackBytes = 6 << 10
