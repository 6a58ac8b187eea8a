# cmake -DINPUT=file -DOUTPUT=file.c -DSYMBOL=name -P embed.cmake: the input's bytes as a
# NUL-terminated C array `const char name[]`, so that a library carries a CUDA source it
# compiles with NVRTC at run time (the file stays a file to read, edit and compile alone).
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
  "/* Generated from ${INPUT} by cmake/embed.cmake. */\n"
  "extern const char ${SYMBOL}[];\nconst char ${SYMBOL}[] = {\n${bytes}0x00};\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
