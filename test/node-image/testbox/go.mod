module lvp.test/testbox

go 1.22
