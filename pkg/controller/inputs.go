package controller

import (
	"hash/maphash"
	"math/bits"

	"github.com/dcontroller/dcontroller/pkg/object"
)

// inputIndex holds the documents fed from one source, by object key. It is
// keyed by a 64-bit hash of the key rather than by the key (whose two
// strings would take 32 bytes more per object): a document's own metadata
// names its key, which get checks. A key whose hash another key already
// holds, or whose document does not name it, is kept by its full key in
// a second map. The zero value is empty and ready to use.
type inputIndex struct {
	byHash map[uint64]inputDoc
	byKey  map[object.Key]inputDoc // collisions and documents that do not name their key
}

var inputSeed = maphash.MakeSeed()

// hashKey hashes an object key for inputIndex (a variable so that tests
// can force collisions).
var hashKey = func(k object.Key) uint64 {
	return maphash.String(inputSeed, k.Name) ^ bits.RotateLeft64(maphash.String(inputSeed, k.Namespace), 31)
}

// docNames reports whether doc's metadata names k (its namespace and name
// as Unstructured's GetNamespace and GetName read them).
func docNames(doc map[string]any, k object.Key) bool {
	if doc == nil {
		return false
	}
	meta, _ := doc["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	ns, _ := meta["namespace"].(string)
	return name == k.Name && ns == k.Namespace
}

// get returns the document of k.
func (x *inputIndex) get(k object.Key) (inputDoc, bool) {
	if d, ok := x.byHash[hashKey(k)]; ok && docNames(d.doc, k) {
		return d, true
	}
	d, ok := x.byKey[k]
	return d, ok
}

// put sets the document of k.
func (x *inputIndex) put(k object.Key, d inputDoc) {
	if _, ok := x.byKey[k]; ok {
		x.byKey[k] = d
		return
	}
	h := hashKey(k)
	if old, ok := x.byHash[h]; (!ok || docNames(old.doc, k)) && docNames(d.doc, k) {
		if x.byHash == nil {
			x.byHash = map[uint64]inputDoc{}
		}
		x.byHash[h] = d
		return
	}
	if old, ok := x.byHash[h]; ok && docNames(old.doc, k) {
		// k moves to the second map: its document does not name it.
		delete(x.byHash, h)
	}
	if x.byKey == nil {
		x.byKey = map[object.Key]inputDoc{}
	}
	x.byKey[k] = d
}

// del removes the document of k.
func (x *inputIndex) del(k object.Key) {
	if _, ok := x.byKey[k]; ok {
		delete(x.byKey, k)
		return
	}
	h := hashKey(k)
	if d, ok := x.byHash[h]; ok && docNames(d.doc, k) {
		delete(x.byHash, h)
	}
}
