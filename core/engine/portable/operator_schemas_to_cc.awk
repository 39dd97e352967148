# operator_schemas_to_cc.awk: operator_schemas.txt (gen_operator_schemas.py's format: one
# operator per line, "name value:Type|Type ...") as the C++ table operator_schemas.h declares
# (GeneratedOperatorSchemas), written at build time so the checked-in table stays one line per
# operator and C++-only builds need nothing but awk.
# usage: awk -f operator_schemas_to_cc.awk operator_schemas.txt > operator_schemas_table.cc

/^#/ || NF == 0 { next }

{
  schemas = schemas sprintf("    {\"%s\", %d, %d},\n", $1, count, NF - 1)
  for (i = 2; i <= NF; ++i) {
    colon = index($i, ":")
    if (colon < 2 || colon == length($i)) {
      printf("operator_schemas_to_cc.awk: line %d: value '%s' is not name:types\n", NR, $i) > "/dev/stderr"
      failed = 1
      exit 1
    }
    tags = "kTag" substr($i, colon + 1)
    gsub(/\|/, " | kTag", tags)
    arguments = arguments sprintf("    {\"%s\", %s},\n", substr($i, 1, colon - 1), tags)
    ++count
  }
}

END {
  if (failed) exit 1
  print "// Generated from core/engine/portable/operator_schemas.txt by operator_schemas_to_cc.awk."
  print ""
  print "#include \"core/engine/portable/operator_schemas.h\""
  print ""
  print "namespace executorch_trt {"
  print "namespace {"
  print ""
  printf("constexpr OperatorArgument kArguments[] = {\n%s};\n\n", arguments)
  printf("constexpr OperatorSchema kSchemas[] = {\n%s};\n\n", schemas)
  print "}  // namespace"
  print ""
  print "OperatorSchemaTable GeneratedOperatorSchemas() {"
  print "  return {kSchemas, sizeof(kSchemas) / sizeof(kSchemas[0]), kArguments};"
  print "}"
  print ""
  print "}  // namespace executorch_trt"
}
