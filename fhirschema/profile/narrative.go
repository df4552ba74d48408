package profile

import (
	"encoding/xml"
	"slices"
	"strings"
)

// checkNarrativeLanguages applies narrative-language-control to a
// Narrative: its language sections are the divs directly inside the
// narrative's div that carry lang or xml:lang. _no prohibits them, _yes
// requires some, _resource requires one in the resource's language, and a
// language code requires one in that language.
func (w *walker) checkNarrativeLanguages(p *compiled, el *element, n node) {
	m := n.object()
	div, _ := m["div"].(string)
	if div == "" {
		return
	}
	langs := languageSections(div)
	for _, want := range el.narrative {
		switch want {
		case "_no":
			if len(langs) > 0 {
				w.errorf(p, "business-rule", n.loc(), "%s: the narrative has language sections (%s), which the profile prohibits", elementID(el), strings.Join(langs, ", "))
			}
		case "_yes":
			if len(langs) == 0 {
				w.errorf(p, "business-rule", n.loc(), "%s: the narrative has no language sections, which the profile requires", elementID(el))
			}
		case "_resource":
			lang, _ := w.resource["language"].(string)
			if lang != "" && !slices.Contains(langs, lang) {
				w.errorf(p, "business-rule", n.loc(), "%s: the narrative has no section in the resource's language %s (it has %s)", elementID(el), lang, strings.Join(langs, ", "))
			}
		default:
			if !slices.Contains(langs, want) {
				w.errorf(p, "business-rule", n.loc(), "%s: the narrative has no section in %s, which the profile requires", elementID(el), want)
			}
		}
	}
}

// languageSections lists the languages of the divs directly inside a
// narrative's div that say theirs.
func languageSections(div string) []string {
	d := xml.NewDecoder(strings.NewReader(div))
	d.Strict = false
	var langs []string
	depth := 0
	for {
		tok, err := d.Token()
		if err != nil { // io.EOF at the end
			return langs
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth != 2 || t.Name.Local != "div" {
				continue
			}
			for _, a := range t.Attr {
				if a.Name.Local == "lang" && a.Value != "" && !slices.Contains(langs, a.Value) {
					langs = append(langs, a.Value)
					break
				}
			}
		case xml.EndElement:
			depth--
		}
	}
}
