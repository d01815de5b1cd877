package wire

import "fmt"

// DataType is a tensor's element type, numbered as TensorFlow's DataType enum.
type DataType int32

// The element types starwire moves. Values are TensorFlow's.
const (
	DTInvalid    DataType = 0
	DTFloat      DataType = 1
	DTDouble     DataType = 2
	DTInt32      DataType = 3
	DTUint8      DataType = 4
	DTInt16      DataType = 5
	DTInt8       DataType = 6
	DTString     DataType = 7
	DTComplex64  DataType = 8
	DTInt64      DataType = 9
	DTBool       DataType = 10
	DTQint8      DataType = 11
	DTQuint8     DataType = 12
	DTQint32     DataType = 13
	DTBfloat16   DataType = 14
	DTQint16     DataType = 15
	DTQuint16    DataType = 16
	DTUint16     DataType = 17
	DTComplex128 DataType = 18
	DTHalf       DataType = 19
	DTResource   DataType = 20
	DTVariant    DataType = 21
	DTUint32     DataType = 22
	DTUint64     DataType = 23
)

// elemSize is the byte size of one element of each fixed-size type; zero for
// types that are not plain old data.
var elemSize = [...]uint8{
	DTFloat: 4, DTDouble: 8, DTInt32: 4, DTUint8: 1, DTInt16: 2, DTInt8: 1,
	DTComplex64: 8, DTInt64: 8, DTBool: 1, DTQint8: 1, DTQuint8: 1, DTQint32: 4,
	DTBfloat16: 2, DTQint16: 2, DTQuint16: 2, DTUint16: 2, DTComplex128: 16,
	DTHalf: 2, DTUint32: 4, DTUint64: 8,
}

// Size returns the byte size of one element, or 0 when elements have no fixed
// size (strings) or the type cannot travel as raw bytes.
func (d DataType) Size() int {
	if d >= 0 && int(d) < len(elemSize) {
		return int(elemSize[d])
	}
	return 0
}

// valid reports whether tensors of d can be encoded by this package.
func (d DataType) valid() bool { return d == DTString || d.Size() > 0 }

func (d DataType) String() string {
	if name, ok := dtypeNames[d]; ok {
		return name
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

var dtypeNames = map[DataType]string{
	DTInvalid: "invalid", DTFloat: "float", DTDouble: "double", DTInt32: "int32",
	DTUint8: "uint8", DTInt16: "int16", DTInt8: "int8", DTString: "string",
	DTComplex64: "complex64", DTInt64: "int64", DTBool: "bool", DTQint8: "qint8",
	DTQuint8: "quint8", DTQint32: "qint32", DTBfloat16: "bfloat16", DTQint16: "qint16",
	DTQuint16: "quint16", DTUint16: "uint16", DTComplex128: "complex128", DTHalf: "half",
	DTResource: "resource", DTVariant: "variant", DTUint32: "uint32", DTUint64: "uint64",
}
