package fhirschema

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// XHTMLNamespace is the namespace of the narrative div.
const XHTMLNamespace = "http://www.w3.org/1999/xhtml"

// CheckXHTML reports whether s is one well-formed XHTML <div> element, as
// a narrative must be (FHIR txt-1), and whether it declares the XHTML
// namespace itself. It reads raw tokens and matches
// the tags itself: namespace translation would cost a third of the render.
func CheckXHTML(s string) (declared bool, err error) {
	if !strings.HasPrefix(s, "<div") {
		return false, fmt.Errorf("the narrative must be a single div element")
	}
	d := xml.NewDecoder(strings.NewReader(s))
	d.Strict = true
	d.Entity = xml.HTMLEntity // XHTML 1.0's named entities; any other is an error
	var open []xml.Name
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			if len(open) != 0 {
				return false, fmt.Errorf("unclosed element <%s>", open[len(open)-1].Local)
			}
			return declared, nil
		}
		if err != nil {
			return false, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(open) == 0 {
				if declared, err = rootDiv(t); err != nil {
					return false, err
				}
			}
			open = append(open, t.Name)
		case xml.EndElement:
			if len(open) == 0 || open[len(open)-1] != t.Name {
				return false, fmt.Errorf("unexpected end tag </%s>", t.Name.Local)
			}
			open = open[:len(open)-1]
			if len(open) == 0 && strings.TrimSpace(s[d.InputOffset():]) != "" {
				return false, fmt.Errorf("content after the div")
			}
		case xml.Directive, xml.ProcInst:
			return false, fmt.Errorf("declarations are not allowed in the narrative")
		}
	}
}

// rootDiv checks the start tag of the narrative: an unprefixed div whose
// default namespace, if declared, is XHTML.
func rootDiv(t xml.StartElement) (declared bool, err error) {
	if t.Name.Space != "" || t.Name.Local != "div" {
		return false, fmt.Errorf("the narrative must be a single div element")
	}
	for _, a := range t.Attr {
		if a.Name.Space == "" && a.Name.Local == "xmlns" {
			if a.Value != XHTMLNamespace {
				return false, fmt.Errorf("the div is in namespace %q", a.Value)
			}
			return true, nil
		}
	}
	return false, nil
}
