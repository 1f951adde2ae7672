class Widget
  def a
  end
end

class Widget
  def b
  end
end # class Widget
