package strictjson_test

import (
	"fmt"

	"github.com/knowdp/knowdp/internal/strictjson"
)

// A request that encoding/json would decode to epsilon 0.2 is refused: its
// key appears twice, once in another case.
func Example() {
	type request struct {
		Kind    string  `json:"kind"`
		Epsilon float64 `json:"epsilon"`
	}
	d := strictjson.Decoder{Name: "request body"}
	var r request
	fmt.Println(d.Decode([]byte(`{"kind":"cuboid","epsilon":0.1}`), &r), r.Epsilon)
	fmt.Println(d.Decode([]byte(`{"kind":"cuboid","epsilon":0.1,"EPSILON":0.2}`), &r))
	fmt.Println(d.Decode([]byte(`{"kind":"cuboid","epsilon":0.1,"epsilon":0.2}`), &r))
	fmt.Println(d.Decode([]byte(`{"kind":"cuboid","epsilon":"0.2"}`), &r))
	// Output:
	// <nil> 0.1
	// EPSILON: unknown field "EPSILON" (field names are case-sensitive: "epsilon")
	// request body: duplicate key "epsilon" in one JSON object
	// epsilon: want a number, got a string
}
