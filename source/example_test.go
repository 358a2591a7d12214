package source_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/knowdp/knowdp/source"
)

// Read the chosen columns of a fact table; Open picks the format.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "people.csv")
	os.WriteFile(path, []byte("id,sex,age\n1,F,30\n2,\"M\",41\n"), 0o644)

	ctx := context.Background()
	t, err := source.Open(ctx, source.Spec{Path: path})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer t.Close()
	if err := t.Select(ctx, []string{"age", "sex"}); err != nil {
		fmt.Println(err)
		return
	}
	for {
		rec, weight, err := t.NextRecord()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s %s x%d\n", rec[0], rec[1], weight)
	}
	// Output:
	// 30 F x1
	// 41 M x1
}
