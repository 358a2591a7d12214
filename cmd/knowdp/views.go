package main

import (
	"strings"

	"github.com/knowdp/knowdp/domain"
)

// formatViews formats views as "{geo:state,sex}, {age}".
func formatViews(s *domain.Schema, vs []domain.View) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = s.FormatView(v)
	}
	return strings.Join(out, ", ")
}
