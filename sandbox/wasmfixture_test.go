package sandbox

// A tiny WebAssembly encoder for test fixtures: each fixture is a WASI
// command written here as bytecode, so no binary is committed and no tool
// beyond Go is needed.

const (
	tI32 = 0x7f
	tI64 = 0x7e
)

type wasmFunc struct {
	typ    int
	locals int // i32 locals
	body   []byte
}

type wasmImport struct {
	module, name string
	typ          int
}

type wasmModule struct {
	types    [][2][]byte // params, results
	imports  []wasmImport
	funcs    []wasmFunc
	memMin   uint32
	data     map[uint32][]byte
	counter  bool // one mutable i32 global, 0
	startIdx int  // index in funcs of _start
}

func uleb(v uint64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			out = append(out, b|0x80)
			continue
		}
		return append(out, b)
	}
}

func sleb(v int64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

func vec(items ...[]byte) []byte {
	out := uleb(uint64(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func name(s string) []byte { return append(uleb(uint64(len(s))), s...) }

func section(id byte, content []byte) []byte {
	return append(append([]byte{id}, uleb(uint64(len(content)))...), content...)
}

func (m *wasmModule) bytes() []byte {
	out := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	var types [][]byte
	for _, t := range m.types {
		types = append(types, append(append([]byte{0x60}, vec(bytesOf(t[0])...)...), vec(bytesOf(t[1])...)...))
	}
	out = append(out, section(1, vec(types...))...)
	var imps [][]byte
	for _, im := range m.imports {
		imps = append(imps, append(append(name(im.module), name(im.name)...), append([]byte{0x00}, uleb(uint64(im.typ))...)...))
	}
	out = append(out, section(2, vec(imps...))...)
	var fns [][]byte
	for _, f := range m.funcs {
		fns = append(fns, uleb(uint64(f.typ)))
	}
	out = append(out, section(3, vec(fns...))...)
	out = append(out, section(5, vec(append([]byte{0x00}, uleb(uint64(m.memMin))...)))...)
	if m.counter {
		out = append(out, section(6, vec([]byte{tI32, 0x01, 0x41, 0x00, 0x0b}))...)
	}
	exports := [][]byte{
		append(name("_start"), append([]byte{0x00}, uleb(uint64(len(m.imports)+m.startIdx))...)...),
		append(name("memory"), 0x02, 0x00),
	}
	out = append(out, section(7, vec(exports...))...)
	var bodies [][]byte
	for _, f := range m.funcs {
		var locals []byte
		if f.locals > 0 {
			locals = vec(append(uleb(uint64(f.locals)), tI32))
		} else {
			locals = vec()
		}
		body := append(locals, f.body...)
		body = append(body, 0x0b)
		bodies = append(bodies, append(uleb(uint64(len(body))), body...))
	}
	out = append(out, section(10, vec(bodies...))...)
	if len(m.data) > 0 {
		var segs [][]byte
		for off, b := range m.data {
			seg := append([]byte{0x00, 0x41}, sleb(int64(off))...)
			seg = append(seg, 0x0b)
			seg = append(seg, uleb(uint64(len(b)))...)
			segs = append(segs, append(seg, b...))
		}
		out = append(out, section(11, vec(segs...))...)
	}
	return out
}

func bytesOf(b []byte) [][]byte {
	out := make([][]byte, len(b))
	for i, x := range b {
		out[i] = []byte{x}
	}
	return out
}

// Instructions.
func i32(v int32) []byte      { return append([]byte{0x41}, sleb(int64(v))...) }
func i64(v int64) []byte      { return append([]byte{0x42}, sleb(v)...) }
func call(f int) []byte       { return append([]byte{0x10}, uleb(uint64(f))...) }
func localGet(i int) []byte   { return append([]byte{0x20}, uleb(uint64(i))...) }
func localSet(i int) []byte   { return append([]byte{0x21}, uleb(uint64(i))...) }
func load32(off int32) []byte { return append(i32(off), 0x28, 0x02, 0x00) }
func store32(addr int32, value ...[]byte) []byte {
	out := i32(addr)
	for _, v := range value {
		out = append(out, v...)
	}
	return append(out, 0x36, 0x02, 0x00)
}
func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var (
	opDrop   = []byte{0x1a}
	opLoop   = []byte{0x03, 0x40}
	opBlock  = []byte{0x02, 0x40}
	opEnd    = []byte{0x0b}
	opI32Eqz = []byte{0x45}
	opI32Eq  = []byte{0x46}
	opI32Add = []byte{0x6a}
	opGrow   = []byte{0x40, 0x00}
)

func br(depth int) []byte   { return append([]byte{0x0c}, uleb(uint64(depth))...) }
func brIf(depth int) []byte { return append([]byte{0x0d}, uleb(uint64(depth))...) }

// WASI imports used by the fixtures, in a fixed order so call indices are
// stable: 0 fd_write, 1 fd_read, 2 proc_exit, 3 environ_sizes_get,
// 4 environ_get, 5 path_open, 6 fd_prestat_get, 7 sock_accept.
const (
	fnWrite = iota
	fnRead
	fnExit
	fnEnvSizes
	fnEnvGet
	fnPathOpen
	fnPrestat
	fnSockAccept
	nImports
)

func wasiModule(memPages uint32, data map[uint32][]byte, locals int, body ...[]byte) []byte {
	m := &wasmModule{
		types: [][2][]byte{
			{{tI32, tI32, tI32, tI32}, {tI32}}, // 0: fd_write, fd_read
			{{tI32}, {}},                       // 1: proc_exit
			{{tI32, tI32}, {tI32}},             // 2: environ_*, fd_prestat_get
			{{tI32, tI32, tI32, tI32, tI32, tI64, tI64, tI32, tI32}, {tI32}}, // 3: path_open
			{{tI32, tI32, tI32}, {tI32}},                                     // 4: sock_accept
			{{}, {}},                                                         // 5: _start
		},
		imports: []wasmImport{
			{"wasi_snapshot_preview1", "fd_write", 0},
			{"wasi_snapshot_preview1", "fd_read", 0},
			{"wasi_snapshot_preview1", "proc_exit", 1},
			{"wasi_snapshot_preview1", "environ_sizes_get", 2},
			{"wasi_snapshot_preview1", "environ_get", 2},
			{"wasi_snapshot_preview1", "path_open", 3},
			{"wasi_snapshot_preview1", "fd_prestat_get", 2},
			{"wasi_snapshot_preview1", "sock_accept", 4},
		},
		funcs:  []wasmFunc{{typ: 5, locals: locals, body: cat(body...)}},
		memMin: memPages,
		data:   data,
	}
	return m.bytes()
}

// exitWith calls proc_exit with the value on top of the stack.
var exitWith = call(fnExit)

// fixtureEcho copies stdin to stdout.
func fixtureEcho() []byte {
	return wasiModule(1, nil, 1,
		store32(0, i32(64)), store32(4, i32(4096)), // iovec for reading
		opLoop,
		/**/ i32(0), i32(0), i32(1), i32(8), call(fnRead), localSet(0),
		/**/ opBlock, localGet(0), opI32Eqz, brIf(0), i32(1), exitWith, opEnd,
		/**/ opBlock, load32(8), opI32Eqz, brIf(0), // n == 0: EOF
		/*   */ store32(16, i32(64)), store32(20, load32(8)),
		/*   */ i32(1), i32(16), i32(1), i32(24), call(fnWrite), opDrop,
		/*   */ br(1),
		/**/ opEnd,
		opEnd,
		i32(0), exitWith,
	)
}

// fixtureEnv writes its environment, entries separated by NUL, to stdout.
func fixtureEnv() []byte {
	return wasiModule(1, nil, 0,
		i32(0), i32(4), call(fnEnvSizes), opDrop,
		i32(1024), i32(2048), call(fnEnvGet), opDrop,
		store32(16, i32(2048)), store32(20, load32(4)),
		i32(1), i32(16), i32(1), i32(24), call(fnWrite), opDrop,
		i32(0), exitWith,
	)
}

// fixtureOpen tries fd_prestat_get on fd 3 (the first preopened directory,
// if there were one) and path_open of path relative to it, with oflags
// (1 = create); it exits with prestat_errno*100 + open_errno.
func fixtureOpen(path string, oflags int32) []byte {
	return wasiModule(1, map[uint32][]byte{256: []byte(path)}, 0,
		i32(3), i32(512), call(fnPrestat), i32(100), []byte{0x6c}, // i32.mul
		i32(3), i32(0), i32(256), i32(int32(len(path))), i32(oflags), i64(-1), i64(-1), i32(0), i32(520), call(fnPathOpen),
		opI32Add, exitWith,
	)
}

// fixtureSock tries to accept on fd 3 and exits with the errno.
func fixtureSock() []byte {
	return wasiModule(1, nil, 0, i32(3), i32(0), i32(512), call(fnSockAccept), exitWith)
}

// fixtureLoop spins forever.
func fixtureLoop() []byte { return wasiModule(1, nil, 0, opLoop, br(0), opEnd) }

// fixtureMemoryBomb grows its memory by 1 MiB until refused, then exits 7.
func fixtureMemoryBomb() []byte {
	return wasiModule(1, nil, 0,
		opBlock, opLoop, i32(16), opGrow, i32(-1), opI32Eq, brIf(1), br(0), opEnd, opEnd,
		i32(7), exitWith,
	)
}

// fixtureFlood writes 1 KiB lines to stdout forever.
func fixtureFlood() []byte {
	line := make([]byte, 1024)
	for i := range line {
		line[i] = 'x'
	}
	line[1023] = '\n'
	return wasiModule(1, map[uint32][]byte{64: line}, 0,
		store32(0, i32(64)), store32(4, i32(1024)),
		opLoop, i32(1), i32(0), i32(1), i32(8), call(fnWrite), opDrop, br(0), opEnd,
	)
}

// fixtureExit exits with code.
func fixtureExit(code int32) []byte { return wasiModule(1, nil, 0, i32(code), exitWith) }

// fixtureBigMemory needs pages of memory before it runs.
func fixtureBigMemory(pages uint32) []byte { return wasiModule(pages, nil, 0, i32(0), exitWith) }

// fixtureCounter increments a global and exits with it: 1 on a fresh
// instance, more if an instance were reused.
func fixtureCounter() []byte {
	m := &wasmModule{
		types:   [][2][]byte{{{tI32}, {}}, {{}, {}}},
		imports: []wasmImport{{"wasi_snapshot_preview1", "proc_exit", 0}},
		funcs: []wasmFunc{{typ: 1, body: cat(
			[]byte{0x23, 0x00}, i32(1), opI32Add, []byte{0x24, 0x00}, // global0 += 1
			[]byte{0x23, 0x00}, call(0),
		)}},
		memMin:  1,
		counter: true,
	}
	return m.bytes()
}
