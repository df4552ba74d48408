package terminology

func (r *run) valueSetRules(vs map[string]any) {}
