package dbsp

// valueMap is a hash map keyed by JSON values under Equal: the state of the
// join indexes and of the groups of GroupBy. Callers pass Hash(key) along so
// it is computed once per key.
type valueMap[V any] struct {
	m    map[uint64]valueSlot[V]
	over map[uint64][]valueSlot[V]
	n    int
}

type valueSlot[V any] struct {
	key any
	val V
}

func (vm *valueMap[V]) get(h uint64, key any) (V, bool) {
	if s, ok := vm.m[h]; ok {
		if Equal(s.key, key) {
			return s.val, true
		}
		for _, o := range vm.over[h] {
			if Equal(o.key, key) {
				return o.val, true
			}
		}
	}
	var zero V
	return zero, false
}

// put sets the value of key, adding the key if it is new.
func (vm *valueMap[V]) put(h uint64, key any, val V) {
	if vm.m == nil {
		vm.m = make(map[uint64]valueSlot[V])
	}
	s, ok := vm.m[h]
	if !ok {
		vm.m[h] = valueSlot[V]{key: key, val: val}
		vm.n++
		return
	}
	if Equal(s.key, key) {
		vm.m[h] = valueSlot[V]{key: s.key, val: val}
		return
	}
	lst := vm.over[h]
	for i := range lst {
		if Equal(lst[i].key, key) {
			lst[i].val = val
			return
		}
	}
	if vm.over == nil {
		vm.over = make(map[uint64][]valueSlot[V])
	}
	vm.over[h] = append(lst, valueSlot[V]{key: key, val: val})
	vm.n++
}

// del removes key if present.
func (vm *valueMap[V]) del(h uint64, key any) {
	s, ok := vm.m[h]
	if !ok {
		return
	}
	lst := vm.over[h]
	if Equal(s.key, key) {
		vm.n--
		if len(lst) > 0 {
			vm.m[h] = lst[len(lst)-1]
			vm.setOverflow(h, lst[:len(lst)-1])
		} else {
			delete(vm.m, h)
		}
		return
	}
	for i := range lst {
		if Equal(lst[i].key, key) {
			vm.n--
			lst[i] = lst[len(lst)-1]
			vm.setOverflow(h, lst[:len(lst)-1])
			return
		}
	}
}

func (vm *valueMap[V]) setOverflow(h uint64, lst []valueSlot[V]) {
	if len(lst) == 0 {
		delete(vm.over, h)
		return
	}
	vm.over[h] = lst
}

func (vm *valueMap[V]) len() int { return vm.n }

// each calls f for every key/value pair in unspecified order.
func (vm *valueMap[V]) each(f func(h uint64, key any, val V)) {
	for h, s := range vm.m {
		f(h, s.key, s.val)
	}
	for h, lst := range vm.over {
		for _, s := range lst {
			f(h, s.key, s.val)
		}
	}
}
