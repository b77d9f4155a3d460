package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// globalExportPrefix names the exports exportMutableGlobals adds.
const globalExportPrefix = "babel.global."

// exportMutableGlobals returns a copy of the WebAssembly module m with one
// more export for each mutable global it defines, named globalExportPrefix
// and the global's index, and those names. wazero lets a host read and set
// only exported globals: a snapshot of an instance (see jsTemplate) must
// carry all of its mutable state, the stack pointer included.
//
// Only the export section changes; every other byte is kept. A module
// without an export section, or already exporting one of the names, is
// refused.
func exportMutableGlobals(m []byte) ([]byte, []string, error) {
	if len(m) < 8 || !bytes.Equal(m[:8], []byte{0x00, 'a', 's', 'm', 1, 0, 0, 0}) {
		return nil, nil, errors.New("wasm: not a version 1 module")
	}
	type span struct{ start, body, end int } // section header, contents, end
	var exports *span
	var mutable []uint32
	var imported uint32 // globals imported, which come first in the index space
	for off := 8; off < len(m); {
		id := m[off]
		size, n := binary.Uvarint(m[off+1:])
		if n <= 0 || size > uint64(len(m)-off-1-n) {
			return nil, nil, fmt.Errorf("wasm: section %d at %d: bad size", id, off)
		}
		s := span{off, off + 1 + n, off + 1 + n + int(size)}
		r := &wasmReader{b: m[s.body:s.end]}
		switch id {
		case 2: // imports
			for i, c := 0, r.u32(); i < int(c) && r.err == nil; i++ {
				r.name()
				r.name()
				switch kind := r.byte(); kind {
				case 0: // func: type index
					r.u32()
				case 1: // table: reftype, limits
					r.byte()
					r.limits()
				case 2: // memory: limits
					r.limits()
				case 3: // global: valtype, mutability
					r.byte()
					r.byte()
					imported++
				case 4: // tag: attribute, type index
					r.byte()
					r.u32()
				default:
					r.fail(fmt.Sprintf("import kind %d", kind))
				}
			}
		case 6: // globals
			for i, c := uint32(0), r.u32(); i < c && r.err == nil; i++ {
				r.byte() // value type
				if r.byte() == 1 {
					mutable = append(mutable, imported+i)
				}
				r.constExpr()
			}
		case 7:
			exports = &s
		}
		if r.err != nil {
			return nil, nil, fmt.Errorf("wasm: section %d: %w", id, r.err)
		}
		off = s.end
	}
	if len(mutable) == 0 {
		return m, nil, nil
	}
	if exports == nil {
		return nil, nil, errors.New("wasm: the module has no export section")
	}
	r := &wasmReader{b: m[exports.body:exports.end]}
	count := r.u32()
	entries := r.b[r.off:]
	for i := uint32(0); i < count && r.err == nil; i++ {
		if name := r.name(); bytes.HasPrefix(name, []byte(globalExportPrefix)) {
			r.fail("the module already exports " + string(name))
		}
		r.byte()
		r.u32()
	}
	if r.err != nil {
		return nil, nil, fmt.Errorf("wasm: export section: %w", r.err)
	}
	body := binary.AppendUvarint(nil, uint64(count)+uint64(len(mutable)))
	body = append(body, entries...)
	names := make([]string, len(mutable))
	for i, g := range mutable {
		names[i] = globalExportPrefix + strconv.FormatUint(uint64(g), 10)
		body = binary.AppendUvarint(body, uint64(len(names[i])))
		body = append(body, names[i]...)
		body = append(body, 3) // export kind: global
		body = binary.AppendUvarint(body, uint64(g))
	}
	out := make([]byte, 0, len(m)+len(body)-(exports.end-exports.body)+8)
	out = append(out, m[:exports.start]...)
	out = append(out, 7)
	out = binary.AppendUvarint(out, uint64(len(body)))
	out = append(out, body...)
	out = append(out, m[exports.end:]...)
	return out, names, nil
}

// wasmReader reads the encodings of a section's contents, remembering the
// first error.
type wasmReader struct {
	b   []byte
	off int
	err error
}

func (r *wasmReader) fail(msg string) {
	if r.err == nil {
		r.err = fmt.Errorf("at %d: %s", r.off, msg)
	}
	r.off = len(r.b)
}

func (r *wasmReader) byte() byte {
	if r.off >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *wasmReader) skip(n int) {
	if n > len(r.b)-r.off {
		r.fail("unexpected end")
		return
	}
	r.off += n
}

// leb reads a LEB128 number (signed or not, at most 10 bytes) and
// returns its low 64 bits taken as unsigned.
func (r *wasmReader) leb() uint64 {
	var v uint64
	for i := 0; i < 10; i++ {
		b := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			return v
		}
	}
	r.fail("LEB128 longer than 10 bytes")
	return 0
}

func (r *wasmReader) u32() uint32 {
	v := r.leb()
	if v > 1<<32-1 {
		r.fail("u32 out of range")
	}
	return uint32(v)
}

func (r *wasmReader) name() []byte {
	n := r.u32()
	start := r.off
	r.skip(int(n))
	return r.b[start:r.off]
}

func (r *wasmReader) limits() {
	flags := r.byte()
	r.leb()
	if flags&1 != 0 {
		r.leb()
	}
}

// constExpr skips a constant expression, up to and including its end.
func (r *wasmReader) constExpr() {
	for r.err == nil {
		switch op := r.byte(); op {
		case 0x0b: // end
			return
		case 0x41, 0x42, 0x23, 0xd2: // i32.const, i64.const, global.get, ref.func
			r.leb()
		case 0x43: // f32.const
			r.skip(4)
		case 0x44: // f64.const
			r.skip(8)
		case 0xd0: // ref.null t
			r.byte()
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant arithmetic
		case 0xfd: // v128.const
			if r.u32() != 12 {
				r.fail("unsupported vector instruction in a constant expression")
			}
			r.skip(16)
		default:
			r.fail(fmt.Sprintf("opcode %#x in a constant expression", op))
		}
	}
}
