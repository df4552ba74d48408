package fhirpatch

// slot is where one element sits in a resource: property key of obj, and
// its position in the array there (-1 when the property holds it alone).
// A primitive's id and extensions sit in the _key twin, at the same
// position.
type slot struct {
	obj   map[string]any
	key   string
	index int
}

// twinKey is the property of a primitive's id and extensions.
func twinKey(key string) string { return "_" + key }

// set replaces the element with v and its twin ext.
func (s slot) set(t *tree, v, ext any) {
	if s.index < 0 {
		t.set(s.obj, s.key, v)
		setOrDelete(t, s.obj, twinKey(s.key), ext)
		return
	}
	list, _ := s.obj[s.key].([]any)
	list[s.index] = v
	s.setTwin(t, len(list), ext)
}

// setTwin sets the twin at the slot's position in a list of n elements.
func (s slot) setTwin(t *tree, n int, ext any) {
	tk := twinKey(s.key)
	twins, _ := s.obj[tk].([]any)
	if twins == nil && ext == nil {
		return
	}
	for len(twins) < n {
		twins = append(twins, nil)
	}
	twins[s.index] = ext
	t.set(s.obj, tk, twins)
	dropNullTwins(s.obj, tk)
}

// remove deletes the element (and its twin).
func (s slot) remove() {
	if s.index < 0 {
		delete(s.obj, s.key)
		delete(s.obj, twinKey(s.key))
		return
	}
	for _, k := range []string{s.key, twinKey(s.key)} {
		if list, ok := s.obj[k].([]any); ok && s.index < len(list) {
			s.obj[k] = append(list[:s.index:s.index], list[s.index+1:]...)
		}
	}
	dropNullTwins(s.obj, twinKey(s.key))
	if list, _ := s.obj[s.key].([]any); len(list) == 0 {
		delete(s.obj, s.key)
	}
}

// insert puts v (and its twin ext) into the list at the slot's position.
func (s slot) insert(t *tree, v, ext any) {
	list, _ := s.obj[s.key].([]any)
	n := len(list)
	t.set(s.obj, s.key, insertAt(list, s.index, v))
	tk := twinKey(s.key)
	twins, hasTwins := s.obj[tk].([]any)
	if !hasTwins && ext == nil {
		return
	}
	for len(twins) < n {
		twins = append(twins, nil)
	}
	t.set(s.obj, tk, insertAt(twins, s.index, ext))
	dropNullTwins(s.obj, tk)
}

// move takes the element at from in the list of key and puts it at to.
func move(obj map[string]any, key string, from, to int) {
	for _, k := range []string{key, twinKey(key)} {
		list, ok := obj[k].([]any)
		if !ok || from >= len(list) || to >= len(list) {
			continue
		}
		v := list[from]
		list = append(list[:from:from], list[from+1:]...)
		obj[k] = insertAt(list, to, v)
	}
}

func insertAt(list []any, i int, v any) []any {
	out := make([]any, 0, len(list)+1)
	out = append(out, list[:i]...)
	out = append(out, v)
	return append(out, list[i:]...)
}

// setOrDelete sets key of obj to v, or deletes it when v is nil.
func setOrDelete(t *tree, obj map[string]any, key string, v any) {
	if v == nil {
		delete(obj, key)
		return
	}
	t.set(obj, key, v)
}

// dropNullTwins deletes a twin array that holds nothing but nulls.
func dropNullTwins(obj map[string]any, tk string) {
	twins, ok := obj[tk].([]any)
	if !ok {
		return
	}
	for _, e := range twins {
		if e != nil {
			return
		}
	}
	delete(obj, tk)
}
