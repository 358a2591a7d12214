package release

// LevelError is the expected error of the cells of a release's tables at
// one level of its hierarchy, as statistical agencies report accuracy by
// geographic level. It is computed from the mechanism alone, never the
// data.
type LevelError struct {
	// Level names the hierarchy's level, or "total" for tables that sum it
	// out.
	Level string `json:"level"`
	// Tables are the released tables at that level, and Cells their cells.
	Tables []string `json:"tables"`
	Cells  int      `json:"cells"`
	// MeanAbsError is the expected absolute error of a cell, averaged over
	// the cells (of the least-squares estimate); MeanMOE90 and MaxMOE90 the
	// mean and largest margin of error: in Release.Levels those of the
	// estimate, in Metadata.Levels those the tables publish in their moe90
	// column (plus 1 for integer rounding, as Table.CellMOE adds it).
	MeanAbsError float64 `json:"expected_mean_abs_error"`
	MeanMOE90    float64 `json:"mean_moe90"`
	MaxMOE90     float64 `json:"max_moe90"`
}
