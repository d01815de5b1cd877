package ops

import "runtime"

// touchRows reads a byte of each cache line of the rows that idx names,
// before a kernel works on them one by one: the reads do not depend on
// each other, so the CPU has many of the rows' cache misses in flight at
// once, where the kernel's own loop, doing a row's arithmetic between
// misses, has few. An embedding table is larger than the caches and a
// step's rows are spread over it, so the sparse kernels' time goes to
// those misses.
//
// The reads take no row lock: their values are dropped, so a row being
// written meanwhile changes nothing. Under the race detector they are
// skipped, as it would report them.
func touchRows(data []byte, idx []int64, rowBytes int) {
	if raceEnabled || rowBytes == 0 {
		return
	}
	var sum byte
	for _, x := range idx {
		o := int(x) * rowBytes
		if x < 0 || o+rowBytes > len(data) {
			continue
		}
		for line := o; line < o+rowBytes; line += cacheLine {
			sum += data[line]
		}
		sum += data[o+rowBytes-1] // a row need not start a line
	}
	runtime.KeepAlive(sum)
}

// cacheLine is the bytes the CPU's caches move at once on the machines
// starwire runs on (x86-64, arm64).
const cacheLine = 64
