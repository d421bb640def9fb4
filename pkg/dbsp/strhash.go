package dbsp

import (
	"encoding/binary"
	"math/rand/v2"
	"unsafe"
)

// strSeed randomises string hashing per process.
var strSeed = rand.Uint64() | 1

// hashString is a wyhash-style hash of a string: reads of 4 or 8 bytes,
// folded with the 128-bit multiply of mix. It is much cheaper than a call
// through hash/maphash for the short keys and values of Kubernetes objects.
func hashString(s string) uint64 {
	n := len(s)
	seed := strSeed ^ uint64(n)*0x9e3779b97f4a7c15
	var a, b uint64
	switch {
	case n == 0:
	case n < 4:
		a = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	case n <= 8:
		a = uint64(le32(s, 0))<<32 | uint64(le32(s, n-4))
	case n <= 16:
		a, b = le64(s, 0), le64(s, n-8)
	default:
		i := 0
		for ; n-i > 16; i += 16 {
			seed = mix(le64(s, i)^0xa0761d6478bd642f, le64(s, i+8)^seed)
		}
		a, b = le64(s, n-16), le64(s, n-8)
	}
	return mix(a^0xe7037ed1a0b428db, b^seed)
}

func le64(s string, i int) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))
}

func le32(s string, i int) uint32 {
	return binary.LittleEndian.Uint32(unsafe.Slice(unsafe.StringData(s[i:]), 4))
}
