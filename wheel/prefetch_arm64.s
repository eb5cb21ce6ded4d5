#include "textflag.h"

// func prefetch(addr unsafe.Pointer)
TEXT ·prefetch(SB), NOSPLIT, $0-8
	MOVD addr+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET

// func prefetchSpan(addr unsafe.Pointer)
TEXT ·prefetchSpan(SB), NOSPLIT, $0-8
	MOVD addr+0(FP), R0
	PRFM (R0), PLDL1KEEP
	PRFM 64(R0), PLDL1KEEP
	PRFM 128(R0), PLDL1KEEP
	PRFM 192(R0), PLDL1KEEP
	PRFM 256(R0), PLDL1KEEP
	PRFM 320(R0), PLDL1KEEP
	PRFM 384(R0), PLDL1KEEP
	PRFM 448(R0), PLDL1KEEP
	RET
