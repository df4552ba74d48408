package profile

// slice assigns each value of the sliced element c to the first slice it
// matches and checks the slicing rules: closed slicing refuses values that
// match no slice, openAtEnd wants them last, ordered slicing wants the
// slices' values in the slices' order, and each slice's cardinality holds.
// It returns the slice of each value, nil for none.
func (w *walker) slice(p *compiled, c *element, items []node, parentLoc string) []*element {
	sl := c.slicing
	if sl == nil {
		sl = defaultSlicing(c)
		if sl == nil {
			return nil
		}
	}
	assigned := make([]*element, len(items))
	counts := make([]int, len(c.slices))
	last, unmatched := -1, false
	for i, it := range items {
		idx := w.sliceOf(p, c, sl, it)
		if idx < 0 {
			if sl.rules == "closed" {
				w.errorf(p, "structure", it.loc(), "%s: the value matches none of the slices, and the slicing is closed", elementID(c))
			}
			unmatched = true
			continue
		}
		if sl.rules == "openAtEnd" && unmatched {
			w.errorf(p, "structure", it.loc(), "%s: values that match no slice must come after those of slice %s (openAtEnd)", elementID(c), c.slices[idx].sliceName)
		}
		if sl.ordered && idx < last {
			w.errorf(p, "structure", it.loc(), "%s: slice %s comes after slice %s, but the slices are ordered", elementID(c), c.slices[idx].sliceName, c.slices[last].sliceName)
		}
		last = max(last, idx)
		assigned[i] = c.slices[idx]
		counts[idx]++
	}
	for j, s := range c.slices {
		if counts[j] < s.min {
			w.errorf(p, "required", parentLoc+"."+c.jsonName(), "%s: slice %s requires at least %d, but found %d", elementID(c), s.sliceName, s.min, counts[j])
		}
		if s.max >= 0 && counts[j] > s.max {
			w.errorf(p, "structure", parentLoc+"."+c.jsonName(), "%s: slice %s allows at most %d, but found %d", elementID(c), s.sliceName, s.max, counts[j])
		}
	}
	return assigned
}

// defaultSlicing is the slicing of extensions that do not say: by url.
func defaultSlicing(c *element) *slicing {
	if c.name != "extension" && c.name != "modifierExtension" {
		return nil
	}
	steps, _ := parseSteps("url")
	return &slicing{rules: "open", discriminators: []discriminator{{typ: "value", path: "url", steps: steps}}}
}

// sliceOf returns the index of the first slice of c the value matches, -1
// for none.
func (w *walker) sliceOf(p *compiled, c *element, sl *slicing, it node) int {
	for j, s := range c.slices {
		if w.sliceMatches(s, sl, it) {
			return j
		}
	}
	return -1
}

// sliceMatches reports whether the value meets every discriminator of
// slice s. A slice with no discriminating value for any discriminator
// matches nothing: values cannot be told to belong to it.
func (w *walker) sliceMatches(s *element, sl *slicing, it node) bool {
	s.discOnce.Do(func() { s.disc = w.discriminatorValues(s, sl) })
	constrained := false
	for _, dv := range s.disc {
		if !dv.constrains() {
			continue
		}
		constrained = true
		if !w.discriminatorMatches(dv, it) {
			return false
		}
	}
	return constrained
}
